"""Stand-ins for ROS 2 tools that ROS from Python wheels lacks; each names what replaces it.

This workspace runs ROS 2 from wheels (real rclpy and DDS, no apt packages), which ship no
`ros2 launch`, `message_filters`, `cv_bridge` or camera drivers. What the graph needs of them is
written here once, small and tested, so that an apt-installed ROS can swap each for the real tool:

| stand-in | plays | on an apt-installed ROS |
|---|---|---|
| `process_runner.ProcessRunner` (CLI: `python -m instant_fold.runner`) | `ros2 launch` | `ros2 launch instant_fold <graph>.launch.py` (same graph files) |
| `exact_sync.ExactTimeSync` | `message_filters.TimeSynchronizer` | `TimeSynchronizer([Subscriber, ...], queue_size)` |
| `image_bridge.image_to_msg` / `image_from_msg` | `cv_bridge.CvBridge` | `cv2_to_imgmsg` / `imgmsg_to_cv2(desired_encoding="rgb8")` |

Two stand-ins are nodes and stay with their packages (they need the RealSense SDK and `rosbags`,
which this package must not pull in): `instant_fold_perception.camera_node` plays
`realsense2_camera` (`align_depth.enable:=true`, remapped to `camera/color`, `camera/depth`,
`camera/camera_info`; its depth is 16UC1 millimetres, which `rgbd_from_msgs` accepts, and it
stamps colour and depth apart, so the consumers' exact sync becomes `ApproximateTimeSynchronizer`), and
`instant_fold_demo.player_node` / `recorder_node` play `ros2 bag play` / `ros2 bag record`.
"""
