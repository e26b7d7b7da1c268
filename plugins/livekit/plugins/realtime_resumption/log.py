"""The plugin's standard-library logger, as LiveKit users expect of a plugin.

The transport underneath logs through loguru, the package's logger.
"""

import logging

logger = logging.getLogger("livekit.plugins.realtime_resumption")
