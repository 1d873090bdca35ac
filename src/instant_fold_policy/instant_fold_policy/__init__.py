"""Policy server: the in-context policy behind ROS services and the execute-fold action.

`server` (demonstration cache + predictions) and `fold_loop` (when to query, when a fold is done)
are plain modules; `policy_server_node` adapts them to ROS.
"""
