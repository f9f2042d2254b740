"""Package data: see pipeline/package_data.py."""
