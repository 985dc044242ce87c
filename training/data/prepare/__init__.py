"""Data preparation: ImageNet-layout folders to sharded TFRecords, a sample generator and the
manifest that travels with the shards (the manifest reader is stdlib-only)."""
