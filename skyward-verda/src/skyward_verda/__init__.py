"""skyward-verda: Verda (formerly DataCrunch) provider."""
