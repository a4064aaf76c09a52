"""skyward-aws: Amazon Web Services provider (EC2, spot, S3 volumes).

``skyward.AWS`` and ``skyward.S3Volume`` resolve to the classes here through the plugin
registry; importing this package directly works too.
"""

from skyward_aws.config import AWS
from skyward_aws.volumes import S3Volume

__all__ = ["AWS", "S3Volume"]
