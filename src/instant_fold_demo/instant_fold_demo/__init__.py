"""instant_fold_demo: record a human fold as a rosbag, track the hands, extract and correct keyframes."""
