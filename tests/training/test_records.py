"""The TFRecord schema: what the writer serializes, the reader parses back unchanged."""

import pytest
import tensorflow as tf  # the training environment has both: a broken install must fail, not skip

from training.data import records


def test_serialize_then_parse_round_trips_every_feature():
    jpeg = tf.io.encode_jpeg(tf.zeros([6, 4, 3], tf.uint8)).numpy()
    blob = records.serialize_example(jpeg, 7, 6, 4, "n01440764_10026.JPEG")
    parsed = records.parse_example(tf.constant(blob))
    assert set(parsed) == set(records.FEATURE_KEYS)
    assert parsed["image/encoded"].numpy() == jpeg
    assert int(parsed["image/class/label"]) == 7
    assert (int(parsed["image/height"]), int(parsed["image/width"])) == (6, 4)
    assert parsed["image/format"].numpy() == b"JPEG"
    assert parsed["image/filename"].numpy() == b"n01440764_10026.JPEG"


def test_negative_labels_are_refused_by_the_writer():
    with pytest.raises(ValueError, match="0-based"):
        records.serialize_example(b"x", -1, 1, 1, "a.jpg")
