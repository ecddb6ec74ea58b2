"""atomic's one JSON reader: bounded in size and depth, typed, one line for whatever is wrong."""

import json

import pytest

import atomic


def test_a_deeply_nested_text_is_one_line_not_a_recursion_error():
    with pytest.raises(atomic.BadJson, match="^command: nested deeper than 32 levels$"):
        atomic.parse_json("[" * 100_000, "command")
    with pytest.raises(atomic.BadJson, match="nested deeper"):
        atomic.parse_json("[" * 40 + "]" * 40, "command")
    assert atomic.parse_json("[" * 32 + "]" * 32, "command") is not None


def test_a_file_over_the_limit_is_refused_without_reading_it_whole(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"pad": "x" * (atomic.MAX_JSON_BYTES + 10)}))
    with pytest.raises(atomic.BadJson, match=r"config.json: 1,048,577 bytes, more than"):
        atomic.read_json(path)


def test_not_json_nan_and_wrong_types_are_one_line(tmp_path):
    path = tmp_path / "summary.json"
    for text, message in [
        ("{", "not JSON"),
        ('{"final_return": NaN}', "NaN is not JSON"),
        ("[1, 2]", "holds a list, not an object"),
        (b"\xff\xfe", "not UTF-8"),
    ]:
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(atomic.BadJson, match=message) as refused:
            atomic.read_json(path)
        assert "\n" not in str(refused.value) and str(path) in str(refused.value)


def test_field_is_typed():
    data = {"seed": 1, "flag": True, "lr": 2, "name": "x", "flags": [1, 2]}
    assert atomic.field(data, "lr", float, "r") == 2
    assert atomic.field(data, "missing", int, "r", default=None) is None
    for key, kind, message in [
        ("flag", int, "'flag' is true or false, not an integer"),
        ("flags", dict, "'flags' is a list, not an object"),
        ("name", (int, float), "'name' is a string, not an integer or a number"),
        ("missing", int, "no 'missing'"),
    ]:
        with pytest.raises(atomic.BadJson, match=message):
            atomic.field(data, key, kind, "resume.safetensors")
