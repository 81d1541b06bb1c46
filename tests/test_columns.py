"""Reading channels from text files of numeric columns (picard_casadi/io/columns.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import picard_casadi as pc

HEADED = """Date file: /somewhere/run7.cdf
3 Variables plus time, with 4 values each

     T      ALPHA        Q      VTAS
     S        DEG    DEG/S       M/S

   0.0      1.0      10.0    100.0
   0.1      2.0      20.0    101.0
   0.2      3.0      30.0    102.0
   0.3      4.0      40.0    103.0
"""


def test_channels_by_header_name_with_angles_in_radians(tmp_path):
    f = tmp_path / "run.asc"
    f.write_text(HEADED)
    d = pc.read_columns(f, {"t": "t", "alpha": "ALPHA", "q": "Q", "V": "VTAS"})
    assert d.units == {"t": "S", "alpha": "rad", "q": "rad/S", "V": "M/S"}
    np.testing.assert_allclose(d["alpha"], np.radians([1, 2, 3, 4]), rtol=1e-15)
    np.testing.assert_allclose(d["q"], np.radians([10, 20, 30, 40]), rtol=1e-15)
    np.testing.assert_array_equal(d["V"], [100, 101, 102, 103])
    assert d.stack("t", "V").shape == (4, 2)
    kept = pc.read_columns(f, {"alpha": 2}, degrees_to_radians=False)
    np.testing.assert_array_equal(kept["alpha"], [1, 2, 3, 4])
    assert kept.units["alpha"] == "DEG"


def test_degrees_converted_twice_or_not_at_all_are_named(tmp_path):
    # a header's DEG converted alpha, and scale={"al": pi/180} again: 0.27 deg
    # for 15.7, silently; a conversion asked where the header has no DEG did nothing
    f = tmp_path / "run.asc"
    f.write_text(HEADED)
    with pytest.raises(ValueError, match=r"`scale`\['al'\] converts degrees to radians, but "
                                         r"its header unit 'DEG' already had it converted"):
        pc.read_columns(f, {"al": "ALPHA"}, scale={"al": math.pi / 180})
    kept = pc.read_columns(f, {"al": "ALPHA"}, scale={"al": math.pi / 180},
                           degrees_to_radians={"al": False})  # the fix it names
    np.testing.assert_allclose(kept["al"], np.radians([1, 2, 3, 4]), rtol=1e-15)
    np.testing.assert_allclose(pc.read_columns(f, {"al": "ALPHA"}, scale={"al": -1.0})["al"],
                               -np.radians([1, 2, 3, 4]), rtol=1e-15)  # another factor: fine
    with pytest.raises(ValueError, match=r"`degrees_to_radians`\['V'\]: the header of .* gives "
                                         r"its column the unit 'M/S', not degrees"):
        pc.read_columns(f, {"V": "VTAS"}, degrees_to_radians={"V": True})
    plain = tmp_path / "plain.txt"
    plain.write_text("0.0 1.0\n0.5 2.0\n")
    with pytest.raises(ValueError, match=r"plain.txt has no header line of units, so nothing "
                                         r"would be converted.*scale=\{'p': "):
        pc.read_columns(plain, {"p": 2}, degrees_to_radians={"p": True})


def test_numbered_channels_without_header_and_factors(tmp_path):
    f = tmp_path / "plain.txt"
    f.write_text("0.0 1.0D+00 5\n0.5 2.0d+00 6\n1.0 3.0E+00 7\n")
    d = pc.read_columns(f, {"t": 1, "p": 2}, scale={"p": math.pi / 180})
    np.testing.assert_allclose(d["p"], np.radians([1, 2, 3]), rtol=1e-15)
    assert d.units == {"t": "", "p": ""}
    csv = tmp_path / "plain.csv"
    csv.write_text("t,y\n0,1\n1,2\n")
    np.testing.assert_array_equal(pc.read_columns(csv, {"y": "y"})["y"], [1, 2])


@pytest.mark.parametrize("text,columns,kw,match", [
    ("1 2\n3 4\n", {"a": 3}, {}, r"`columns`\['a'\]: column 3 of .*, which has 2 columns"),
    ("1 2\n3 4\n", {"a": "Q"}, {}, r"'Q' is not a channel of .* the file has no header"),
    ("1 2\n3\n", {"a": 1}, {}, r"line 2: 1 numbers, the first row \(line 1\) has 2"),
    ("1 2\nx y\n", {"a": 1}, {}, r"line 2: not a row of numbers"),
    ("just words\n", {"a": 1}, {}, r"has no rows of numbers"),
    ("1 2\n", {"a": 1}, {"scale": {"b": 2.0}}, r"`scale` names channels that were not read: b"),
    ("1 2\n", {}, {}, r"`columns` must map each channel"),
    ("1 2\n", {"a": True}, {}, r"a column number \(from 1\) or a header name"),
])
def test_bad_input_names_the_file_line_or_channel(tmp_path, text, columns, kw, match):
    f = tmp_path / "bad.txt"
    f.write_text(text)
    with pytest.raises(ValueError, match=match):
        pc.read_columns(f, columns, **kw)


def test_a_mat_file_is_named_with_the_way_to_read_it(tmp_path):
    # the flight-test data's .mat twins: "has no rows of numbers" said nothing of why
    f = tmp_path / "run.mat"
    f.write_bytes(b"MATLAB 5.0 MAT-file, Platform: GLNXA64" + bytes(100) + b"\x01\x02")
    with pytest.raises(ValueError, match=r"run.mat' is a MATLAB .mat file, not columns of "
                                         r"text: read it with scipy.io.loadmat"):
        pc.read_columns(f, {"q": 8})
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01" * 50)
    with pytest.raises(ValueError, match=r"is a binary file, not columns of text"):
        pc.read_columns(tmp_path / "blob.bin", {"q": 1})


def test_a_missing_file_says_so(tmp_path):
    with pytest.raises(ValueError, match=r"`path`: cannot read"):
        pc.read_columns(tmp_path / "nowhere.asc", {"a": 1})
    with pytest.raises(KeyError, match=r"'b' was not read"):
        (tmp_path / "x.txt").write_text("1\n")
        pc.read_columns(tmp_path / "x.txt", {"a": 1})["b"]
