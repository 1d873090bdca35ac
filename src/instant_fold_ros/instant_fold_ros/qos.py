"""QoS profiles of the online graph, chosen once so publishers and subscribers always match."""

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

#: Observations (images, masks, cloth tokens, arm state): only the freshest sample matters, but
#: delivery stays reliable so a consumer never acts on a torn sequence of partial samples.
OBSERVATION_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=2,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)

#: Commands (action chunks): reliable and ordered, small queue.
COMMAND_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)

#: Slow-changing descriptions (camera info, loaded demonstration): late joiners get the last one.
LATCHED_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
