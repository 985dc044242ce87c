"""The data path every flavour shares, framework-free: the record schema (`records`), TFRecord
framing with checksums (`tfrecord`), the `tf.train.Example` codec (`example_codec`), counting
(`record_count`), shard names and per-rank assignment (`shards`), copying shards to local disk
(`copy_shards`), seeded data order (`shuffle_order`), synthetic data (`synthetic`) and preparing
ImageNet-layout folders into shards (`prepare`)."""
