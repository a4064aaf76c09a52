"""skyward-aws: Amazon Web Services provider (EC2, spot, S3 volumes)."""
