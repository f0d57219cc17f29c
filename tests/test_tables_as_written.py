"""Tables as spreadsheets and people write them, through ``init``, ``validate``,
``run`` and ``predict``: a name given twice, a quoted line break, a delimiter at
the end of every line, a header of numbers, a folder reached through a link,
text input columns, other encodings; and the wording of what is refused."""
import csv
import io
import json

import numpy as np
import pytest
import yaml

from adaptive_hmc.front.cli import main
from adaptive_hmc.data import read_inputs
from adaptive_hmc.tables import DataError, parse_table, read_table
from cli_helpers import _raw, _small, _write


def _short(cfg):
    """The config at ``cfg`` cut to a run of seconds."""
    raw = yaml.safe_load(cfg.read_text())
    raw["run"].update(super_transitions=3, budget=300, until=None, burn_in={"super_transitions": 1}, thin=2)
    raw["tuner"]["bounds"]["num_steps"] = [10, 100]
    raw["tuner"]["warmup_super_transitions"] = 1
    raw["sampler"].update(initial_phase_steps=100, start="random")
    cfg.write_text(yaml.safe_dump(raw))
    return raw


def test_a_column_name_given_twice_is_refused_naming_both_positions(tmp_path, capsys):
    """``size,price,age,price``: the first 'price' would be read as the target and
    the second as an input; init, validate and run refuse it, naming columns 1 and 3."""
    rows = ["size,price,age,price"] + [f"{i},{2 * i},{i % 7},{3 * i}" for i in range(30)]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    said = "the header names column 'price' twice (columns 1 and 3, counted from 0)"
    assert main(["init", "regression", "--csv", str(tmp_path / "t.csv"), "--target", "price",
                 "--out", str(tmp_path / "c.yaml")]) == 2
    assert said in capsys.readouterr().err and not (tmp_path / "c.yaml").exists()
    raw = _small(_raw(), n=3)
    raw["data"] = {"path": str(tmp_path / "t.csv"), "target_columns": ["price"], "train_rows": [1, 20],
                   "test_sets": {"rest": [21, 30]}}
    cfg = _write(tmp_path, raw)
    for cmd in (["validate", str(cfg), "--no-estimate"], ["run", str(cfg), "--out", str(tmp_path / "r")]):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert said in err and str(cfg) in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_a_quoted_line_break_is_read_as_pythons_csv_module_reads_it(tmp_path):
    """A header cell ``"weight<newline>(kg)"`` keeps its line break, as csv.reader
    gives it; a number cell holding one is refused naming its row and column."""
    text = 'size,"weight\n(kg)",label\n1,2,"a\nb"\n3,4,c\n'
    (tmp_path / "t.csv").write_text(text)
    expected = list(csv.reader(io.StringIO(text)))
    table = parse_table(tmp_path / "t.csv", "data.path", "t.csv", text_columns=lambda names, width: [2])
    assert table.names == expected[0] == ["size", "weight\n(kg)", "label"]
    assert table.texts[2] == [expected[1][2], expected[2][2]] == ["a\nb", "c"]
    np.testing.assert_array_equal(table.A[:, :2], [[1, 2], [3, 4]])
    (tmp_path / "n.csv").write_text('x,y\n1,"1\n5"\n2,3\n')
    with pytest.raises(DataError, match=r"row 1, column 1 is '1\\n5' \(a line break inside a quoted cell\)"):
        parse_table(tmp_path / "n.csv", "data.path", "n.csv")


def test_a_delimiter_at_the_end_of_every_line_is_dropped_with_a_note(tmp_path, capsys):
    """``size,weight,age,price,``: the empty column is left out and said; init's
    config validates (at 92ff94a every row was dropped as missing, and the
    message named neither). A column empty in every row elsewhere is named."""
    rng = np.random.default_rng(0)
    rows = ["size,weight,age,price,"] + [",".join(f"{v:.4f}" for v in rng.normal(size=4)) + "," for _ in range(40)]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    table = parse_table(tmp_path / "t.csv", "data.path", "t.csv")
    assert table.names == ["size", "weight", "age", "price"] and table.A.shape == (40, 4)
    assert "column 4 (counted from 0) is empty in every row, header included" in table.notes[0]
    cfg = tmp_path / "c.yaml"
    assert main(["init", "regression", "--csv", str(tmp_path / "t.csv"), "--out", str(cfg)]) == 0
    assert "is empty in every row" in capsys.readouterr().out
    _short(cfg)
    assert main(["validate", str(cfg), "--no-estimate"]) == 0
    assert "column 4 (counted from 0) is empty in every row" in capsys.readouterr().err
    rows = ["size,weight,age,price"] + [f"{i},,{i % 3},{2 * i}" for i in range(40)]     # an empty named column
    (tmp_path / "e.csv").write_text("\n".join(rows) + "\n")
    raw = yaml.safe_load(cfg.read_text())
    raw["data"]["path"] = "e.csv"
    cfg.write_text(yaml.safe_dump(raw))
    assert main(["validate", str(cfg), "--no-estimate"]) == 2
    assert "every one of the 40 rows has a missing value, so none is left to train on: input column 'weight' is " \
           "empty in every row" in capsys.readouterr().err


def test_a_header_of_numbers_is_noted(tmp_path, capsys):
    """A first row of years over values of another range is read as data (the
    config names columns by number), and validate says so and how to change it;
    a first row like the rest is not noted (the check has a negative case)."""
    rng = np.random.default_rng(1)
    body = [",".join(f"{v:.3f}" for v in rng.uniform(0, 10, size=4)) for _ in range(40)]
    (tmp_path / "y.csv").write_text("\n".join(["2019,2020,2021,2022"] + body) + "\n")
    (tmp_path / "n.csv").write_text("\n".join(body) + "\n")
    assert "set data.header: true" in parse_table(tmp_path / "y.csv", "data.path", "y.csv").notes[0]
    assert parse_table(tmp_path / "n.csv", "data.path", "n.csv").notes == ()
    assert parse_table(tmp_path / "y.csv", "data.path", "y.csv", header=False).notes == ()     # the user said so
    raw = _small(_raw(), n=3)
    raw["data"] = {"path": "y.csv", "target_columns": [-1], "train_rows": [1, 30], "test_sets": {"rest": [31, 41]}}
    cfg = _write(tmp_path, raw)
    assert main(["validate", str(cfg), "--no-estimate"]) == 0
    assert "the first row (2019, 2020, 2021, 2022) holds only numbers, so it is read as data; if it names the " \
           "columns, set data.header: true" in capsys.readouterr().err


def test_init_writes_a_data_path_that_resolves_through_links(tmp_path, capsys):
    """``init --csv link/data.csv --out link/my.yaml``, where ``link`` points to a
    deeper folder: the config's data.path resolves from the config's folder."""
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    rows = ["x,y"] + [f"{i},{2 * i}" for i in range(30)]
    (deep / "data.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "link").symlink_to(deep)
    link = tmp_path / "w" / "link"
    assert main(["init", "regression", "--csv", str(link / "data.csv"), "--out", str(link / "my.yaml")]) == 0
    path = yaml.safe_load((link / "my.yaml").read_text())["data"]["path"]
    assert (link / path).is_file() and (link / path).resolve() == (deep / "data.csv").resolve()
    _short(link / "my.yaml")
    assert main(["validate", str(link / "my.yaml"), "--no-estimate"]) == 0


def _people(n=90, seed=0):
    """A table with text inputs: smoker (yes/no), region (three levels), and a text-labelled target."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(20, 70, n)
    smoker = rng.choice(["yes", "no"], n)
    region = rng.choice(["north", "south", "east"], n)
    charge = age / 10 + 3 * (smoker == "yes") + (region == "east") + 0.3 * rng.normal(size=n)
    return age, smoker, region, charge


def test_text_input_columns_go_through_init_run_and_predict(tmp_path, capsys):
    """A yes/no input and a three-level one: init records their levels
    (data.categorical), the run encodes them (one 0/1 column, three
    indicator columns), predict encodes a table with the columns in another
    order the same way, and refuses an unseen level naming the row, the column
    and the levels it knows."""
    age, smoker, region, charge = _people()
    rows = ["age,smoker,region,charge"] + [f"{a:.2f},{s},{r},{c:.3f}" for a, s, r, c in
                                           zip(age, smoker, region, charge)]
    (tmp_path / "p.csv").write_text("\n".join(rows) + "\n")
    cfg = tmp_path / "p.yaml"
    assert main(["init", "regression", "--csv", str(tmp_path / "p.csv"), "--out", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "input column 'smoker' holds text: encoded as smoker=yes" in out
    assert "encoded as region=east, region=north, region=south" in out
    raw = _short(cfg)
    assert raw["data"]["categorical"] == {"smoker": ["no", "yes"], "region": ["east", "north", "south"]}
    t = read_table(tmp_path / "p.csv", ["charge"], "data.path", "p.csv", categorical=raw["data"]["categorical"])
    assert t.input_names == ["age", "smoker=yes", "region=east", "region=north", "region=south"]
    np.testing.assert_array_equal(t.X[:, 1], smoker == "yes")
    np.testing.assert_array_equal(t.X[:, 2:], np.column_stack([region == r for r in ("east", "north", "south")]))
    assert main(["run", str(cfg), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    capsys.readouterr()
    (tmp_path / "new.csv").write_text("region,age,smoker\neast,30,yes\nnorth,50,no\n")      # another order
    assert main(["predict", str(tmp_path / "run"), str(tmp_path / "new.csv"), "--out", str(tmp_path / "o.csv")]) == 0
    from adaptive_hmc.rundir.finished_run import read_run
    run = read_run(tmp_path / "run")
    X = read_inputs(tmp_path / "new.csv", run.n_raw_inputs, run.input_map.names, [], dict(run.input_map.levels))
    np.testing.assert_array_equal(X, [[30, 1, 1, 0, 0], [50, 0, 0, 1, 0]])
    got = np.loadtxt(tmp_path / "o.csv", delimiter=",", skiprows=1)[:, 0]
    np.testing.assert_allclose(got, run.predict(X)[:, 0], rtol=1e-9)
    (tmp_path / "bad.csv").write_text("age,smoker,region\n30,yes,east\n40,no,west\n")
    assert main(["predict", str(tmp_path / "run"), str(tmp_path / "bad.csv")]) == 2
    err = capsys.readouterr().err
    assert "row 2 of" in err and "column 'region' is 'west', a level the run was not trained on; it knows 'east', " \
                                 "'north', 'south'" in err and "Traceback" not in err


def test_text_inputs_that_are_not_levels_are_refused_clearly(tmp_path, capsys):
    """A column of numbers with a stray word names the cell; a column of 40
    distinct texts (an identifier) is refused as too many levels; a
    config's categorical naming no column, or the target, is refused."""
    rows = ["a,b,y"] + [f"{i},{'oops' if i == 7 else i},{i}" for i in range(40)]
    (tmp_path / "s.csv").write_text("\n".join(rows) + "\n")
    assert main(["init", "regression", "--csv", str(tmp_path / "s.csv"), "--out", str(tmp_path / "s.yaml")]) == 2
    assert "row 8, column 1 ('b') is 'oops', in a column of numbers" in capsys.readouterr().err
    rows = ["id,b,y"] + [f"person{i},{i},{i}" for i in range(40)]
    (tmp_path / "i.csv").write_text("\n".join(rows) + "\n")
    assert main(["init", "regression", "--csv", str(tmp_path / "i.csv"), "--out", str(tmp_path / "i.yaml")]) == 2
    assert "input column 'id' holds 40 distinct texts" in capsys.readouterr().err
    (tmp_path / "n.csv").write_text("\n".join(["a,b,y"] + [f"{i},{i},{i}" for i in range(40)]) + "\n")
    for categorical, said in (({"nope": ["a"]}, "data.categorical = ['nope']: no column named 'nope'"),
                              ({"y": ["a"]}, "data.categorical = ['y']: names a target column")):
        with pytest.raises(DataError, match=said.replace("[", r"\[").replace("]", r"\]")):
            read_table(tmp_path / "n.csv", ["y"], "data.path", "n.csv", categorical=categorical)
    with pytest.raises(DataError, match=r"row 1, column 0 is 'person0' .* a column of text levels is listed in "
                                        r"data.categorical"):
        read_table(tmp_path / "i.csv", ["y"], "data.path", "i.csv")


def test_other_encodings_are_named_and_read_when_named(tmp_path, capsys):
    """A Latin-1 file is refused saying the byte and how to name its encoding,
    and read with data.encoding (init --encoding writes it); a UTF-16 file with
    its byte-order mark is read as is."""
    rows = ["größe,preis"] + [f"{i},{2 * i}" for i in range(30)]
    text = "\n".join(rows) + "\n"
    (tmp_path / "l.csv").write_bytes(text.encode("latin-1"))
    (tmp_path / "u.csv").write_bytes(text.encode("utf-16"))
    with pytest.raises(DataError, match=r"not UTF-8 text: byte 0xf6 at offset 2 .*Latin-1 or Windows-1252\? name "
                                        r"the encoding \(data.encoding in a config"):
        parse_table(tmp_path / "l.csv", "data.path", "l.csv")
    assert parse_table(tmp_path / "l.csv", "data.path", "l.csv", encoding="latin-1").names == ["größe", "preis"]
    assert parse_table(tmp_path / "u.csv", "data.path", "u.csv").names == ["größe", "preis"]
    with pytest.raises(DataError, match="encoding 'latin-9x' is not one Python knows"):
        parse_table(tmp_path / "l.csv", "data.path", "l.csv", encoding="latin-9x")
    cfg = tmp_path / "l.yaml"
    assert main(["init", "regression", "--csv", str(tmp_path / "l.csv"), "--out", str(cfg)]) == 2
    assert "name the encoding" in capsys.readouterr().err
    assert main(["init", "regression", "--csv", str(tmp_path / "l.csv"), "--out", str(cfg), "--encoding",
                 "latin-1"]) == 0
    raw = _short(cfg)
    assert raw["data"]["encoding"] == "latin-1" and raw["data"]["target_columns"] == ["preis"]
    assert main(["validate", str(cfg), "--no-estimate"]) == 0


def test_wording_of_refusals(tmp_path, capsys):
    """predict's non-finite message counts columns from 0 as the others do;
    ``run --dry-run --json`` prints standard JSON (no NaN or Infinity); a changed sampler.arithmetic on
    --resume names the key and both values."""
    from cli_helpers import _checkpointed
    (tmp_path / "x.csv").write_text("a,b\n1,2\n3,inf\n")
    with pytest.raises(ValueError, match=r"first at row 2, column 1; rows counted from 1, columns from 0"):
        read_inputs(tmp_path / "x.csv", 2)
    cfg = _write(tmp_path, _small(_raw(), n=3))
    assert main(["run", str(cfg), "--dry-run", "--json"]) == 0
    out = capsys.readouterr().out
    strict = json.loads(out, parse_constant=lambda c: pytest.fail(f"not standard JSON: {c}"))   # as jq reads it
    assert strict["name"] == yaml.safe_load(cfg.read_text())["name"]
    assert strict["model"]["priors"]["output_bias"]["shape"] == "inf"          # an infinity, as a string
    path, out_dir = _checkpointed(tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw["sampler"]["arithmetic"] = "float32"
    path.write_text(yaml.safe_dump(raw))
    assert main(["run", str(path), "--out", str(out_dir), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "the config differs from the one this run started with" in err
    assert "sampler.arithmetic: 'float64' then, 'float32' now" in err


def test_a_second_run_during_the_first_ones_start_is_told_in_use_first(tmp_path, capsys):
    """A run still in its optimised starts holds the directory's lock and has
    written only its start files: a second run into it is refused as in use,
    without first saying it starts the directory over."""
    from adaptive_hmc.config import read_config
    from adaptive_hmc.rundir.results import RunDir
    cfg = _write(tmp_path, _small(_raw(), n=3))
    rd = RunDir(tmp_path / "r")
    held = rd.lock()
    rd.start(read_config(cfg), str(cfg), 1)
    assert rd.status() == "started"
    try:
        assert main(["run", str(cfg), "--out", str(tmp_path / "r")]) == 2
    finally:
        held.close()
    err = capsys.readouterr().err
    assert "in use by another run" in err and "starting it over" not in err
    assert main(["run", str(cfg), "--out", str(tmp_path / "r"), "--quiet"]) == 0         # free again: it starts over
    assert "stopped before its first checkpoint; starting it over" in capsys.readouterr().err


# issue 86: text levels read back as they were written, tables read by Python's csv module whole


def _levels_table(tmp_path, levels, n=60, name="g.csv", seed=0):
    """A table age, grade (text, cycling through ``levels``), charge; its path."""
    rng = np.random.default_rng(seed)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["age", "grade", "charge"])
    for i in range(n):
        w.writerow([f"{rng.uniform(20, 70):.2f}", levels[i % len(levels)], f"{i % len(levels) + rng.normal():.3f}"])
    (tmp_path / name).write_text(buf.getvalue(), encoding="utf-8")
    return tmp_path / name


def test_numeric_looking_levels_are_read_back_as_written(tmp_path):
    """Levels 01 and 1 are two levels: a predict file whose cells are all '01' gets the indicator of '01', not
    of '1' (at 02070ed the cells were parsed as numbers and printed back as '1'); levels of digits alone, written
    by hand, are read as written in training and prediction."""
    levels = {"grade": ["01", "1", "x", "y"]}
    names = ["age"] + [f"grade={lv}" for lv in levels["grade"]]
    (tmp_path / "p.csv").write_text("age,grade\n30,01\n40,01\n")
    X = read_inputs(tmp_path / "p.csv", 5, names, [], levels)
    np.testing.assert_array_equal(X, [[30, 1, 0, 0, 0], [40, 1, 0, 0, 0]])
    zips = {"grade": ["01", "02", "A", "B"]}
    (tmp_path / "z.csv").write_text("age,grade\n30,01\n40,02\n")
    X = read_inputs(tmp_path / "z.csv", 5, ["age"] + [f"grade={lv}" for lv in zips["grade"]], [], zips)
    np.testing.assert_array_equal(X[:, 1:3], [[1, 0], [0, 1]])
    (tmp_path / "t.csv").write_text("age,grade,charge\n" + "".join(f"{i},0{1 + i % 2},{i}\n" for i in range(20)))
    t = read_table(tmp_path / "t.csv", ["charge"], "data.path", "t.csv", categorical={"grade": ["01", "02"]})
    assert t.input_names == ["age", "grade=02"]
    np.testing.assert_array_equal(t.X[:, 1], [i % 2 for i in range(20)])


LEVELS = ["01", "1", "none", "n/a", "null", "café", "😀", "a\u2028b"]


def test_text_levels_round_trip_from_the_csv_through_init_run_and_predict(tmp_path, capsys):
    """Numeric-looking ('01' beside '1'), non-ASCII (an accent, an emoji, a U+2028 inside the cell) and NA-like
    levels ('none', 'n/a', 'null', not the documented missing markers) are written by init as UTF-8, validated,
    trained on and encoded by predict exactly as the CSV wrote them; 'NA' is read as missing, and init says so."""
    path = _levels_table(tmp_path, LEVELS + ["NA"], n=90)
    cfg = tmp_path / "g.yaml"
    assert main(["init", "regression", "--csv", str(path), "--out", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "column 'grade': 10 rows hold 'NA', read as missing" in out, out
    text = cfg.read_text(encoding="utf-8")
    assert "😀" in text and "café" in text and "\\ud83d" not in text
    assert yaml.safe_load(text)["data"]["categorical"] == {"grade": sorted(LEVELS)}
    _short(cfg)
    assert main(["validate", str(cfg), "--no-estimate"]) == 0
    assert main(["run", str(cfg), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    from adaptive_hmc.rundir.finished_run import read_run
    run = read_run(tmp_path / "run")
    assert dict(run.input_map.levels) == {"grade": tuple(sorted(LEVELS))}
    for level in LEVELS:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([["grade", "age"], [level, "30"], [level, "50"]])
        (tmp_path / "new.csv").write_text(buf.getvalue(), encoding="utf-8")
        capsys.readouterr()
        assert main(["predict", str(tmp_path / "run"), str(tmp_path / "new.csv"), "--out",
                     str(tmp_path / "o.csv")]) == 0, capsys.readouterr().err
        onehot = [float(lv == level) for lv in sorted(LEVELS)]
        expected = run.predict(np.array([[30.0] + onehot, [50.0] + onehot]))[:, 0]
        got = np.loadtxt(tmp_path / "o.csv", delimiter=",", skiprows=1)[:, 0]
        np.testing.assert_allclose(got, expected, rtol=1e-9, err_msg=level)


def test_only_the_documented_missing_markers_are_missing():
    """Empty, ?, NA and nan (any case) are missing, as docs/CONFIG.md says; none, null and n/a are text."""
    from adaptive_hmc.config.parse import reference
    from adaptive_hmc.tables import MISSING
    assert set(MISSING) == {"", "?", "na", "nan"}
    assert "(empty, ?, NA, nan)" in reference()


@pytest.mark.parametrize("cells", [["5%", "10%", "15%"], ["1,5", "2,0", "2,5"], ["$3", "$4", "$5"]])
def test_numbers_written_with_units_or_a_decimal_comma_are_refused(tmp_path, capsys, cells):
    """A column of 5%, 10%, ... (or 1,5, 2,0, ... in a semicolon table) is numbers written as text, not 30
    levels: init refuses it naming the file, the column and a cell and saying how to write it; a run on
    such a table says the same."""
    rows = ["s;rate;p"] + [f"{i};{cells[i % 3]};{i}" for i in range(30)]
    (tmp_path / "u.csv").write_text("\n".join(rows) + "\n")
    assert main(["init", "regression", "--csv", str(tmp_path / "u.csv"), "--out", str(tmp_path / "u.yaml")]) == 2
    err = capsys.readouterr().err
    assert f"input column 'rate' of {tmp_path / 'u.csv'} holds numbers written as text: row 1 is {cells[0]!r}" \
           in err and "plain numbers" in err and "Traceback" not in err, err
    assert not (tmp_path / "u.yaml").exists()
    with pytest.raises(DataError, match=r"row 1, column 1 is .*a number written with a unit or a decimal comma"):
        read_table(tmp_path / "u.csv", ["p"], "data.path", "u.csv")


@pytest.mark.parametrize("text", ['a,b\n"1\n# not a comment",2\n3,4\n', 'a,b\n"1\n\nx",2\n3,4\n',
                                  "a,b\n1\u2028x,2\n3,4\n", "a,b\n1\x0cx,2\n3,4\n", "a,b\n1\x85x,2\n3,4\n"])
def test_lines_are_split_by_pythons_csv_module_alone(tmp_path, text):
    """A # line or a blank line inside a quoted cell, an unquoted U+2028, form feed or U+0085 inside a cell:
    the cell whole, as csv.reader(io.StringIO(text, newline='')) reads it; blank and # rows outside quotes
    are skipped."""
    (tmp_path / "t.csv").write_text("# a comment\n\n" + text + "\n# the end\n", encoding="utf-8", newline="")
    table = parse_table(tmp_path / "t.csv", "data.path", "t.csv", text_columns=lambda names, width: [0])
    expected = list(csv.reader(io.StringIO(text, newline="")))
    assert table.names == ["a", "b"] and table.texts[0] == [expected[1][0], "3"]
    np.testing.assert_array_equal(table.A[:, 1], [2, 4])


def test_a_cp1252_file_read_as_latin_1_keeps_its_cells_whole(tmp_path):
    """cp1252's '…' (byte 0x85) read with the suggested --encoding latin-1 is U+0085, a line break to
    str.splitlines: the cell stays whole."""
    (tmp_path / "w.csv").write_bytes("a,b\nwait…more,1\nok,2\n".encode("cp1252"))
    table = parse_table(tmp_path / "w.csv", "data.path", "w.csv", encoding="latin-1",
                        text_columns=lambda names, width: [0])
    assert table.texts[0] == ["wait\x85more", "ok"] and table.A.shape == (2, 2)


@pytest.mark.parametrize("name", ["utf-8", "UTF8", "utf_8"])
def test_a_byte_order_mark_is_not_part_of_the_first_name_when_utf_8_is_named(tmp_path, name):
    (tmp_path / "b.csv").write_bytes("\ufeffsize,price\n1,2\n".encode("utf-8"))
    assert parse_table(tmp_path / "b.csv", "data.path", "b.csv", encoding=name).names == ["size", "price"]


def test_a_numeric_column_named_like_a_text_columns_indicator_is_refused(tmp_path, capsys):
    """``a=y`` beside a text column ``a`` of levels x, y: the network would have two inputs named 'a=y', and
    predict could never be given them; init and validate refuse it naming both."""
    rows = ["a,a=y,p"] + [f"{'xy'[i % 2]},{i},{i}" for i in range(30)]
    (tmp_path / "c.csv").write_text("\n".join(rows) + "\n")
    said = "input column 'a=y' and text column 'a''s indicator of level 'y' have one name"
    assert main(["init", "regression", "--csv", str(tmp_path / "c.csv"), "--out", str(tmp_path / "c.yaml")]) == 2
    err = capsys.readouterr().err
    assert said in err and str(tmp_path / "c.csv") in err and not (tmp_path / "c.yaml").exists(), err
    raw = _small(_raw(), n=3)
    raw["data"] = {"path": str(tmp_path / "c.csv"), "target_columns": ["p"], "train_rows": [1, 20],
                   "test_sets": {"rest": [21, 30]}, "categorical": {"a": ["x", "y"]}}
    cfg = _write(tmp_path, raw)
    assert main(["validate", str(cfg), "--no-estimate"]) == 2
    err = capsys.readouterr().err
    assert said in err and str(cfg) in err and "Traceback" not in err, err


def test_wording_of_table_refusals_86(tmp_path):
    """predict names an extra text column or the label column as not inputs of the run; its non-finite message
    counts the file's columns; data.categorical naming no column or the target is said before the parse;
    duplicate levels are refused; utf-16 named for a UTF-8 file is said to be UTF-8."""
    levels = {"region": ["east", "north", "west"]}
    names = ["region=east", "region=north", "region=west", "age"]
    (tmp_path / "l.csv").write_text("region,age,label\neast,30,high\n")
    with pytest.raises(ValueError, match=r"not inputs of the run: \['label'\]"):
        read_inputs(tmp_path / "l.csv", 4, names, [], levels)
    (tmp_path / "n.csv").write_text("a,b,name\n1,2,bob\n")
    with pytest.raises(ValueError, match=r"not inputs of the run: \['name'\]"):
        read_inputs(tmp_path / "n.csv", 2, ["a", "b"], [])
    (tmp_path / "e.csv").write_text("region,age\neast,30\nwest,\n")
    with pytest.raises(ValueError, match=r"first at row 2, column 1; rows counted from 1, columns from 0"):
        read_inputs(tmp_path / "e.csv", 4, names, [], levels)
    (tmp_path / "w.csv").write_text("s,w,p\n" + "".join(f"{i},{'ab'[i % 2]},{i}\n" for i in range(30)))
    for categorical, said in (({"x": ["a"]}, r"data.categorical = \['x'\]: no column named 'x'"),
                              ({"p": ["a"]}, r"data.categorical = \['p'\]: names a target column")):
        with pytest.raises(DataError, match=said):
            read_table(tmp_path / "w.csv", ["p"], "data.path", "w.csv", categorical=categorical)
    with pytest.raises(DataError, match=r"data.categorical.w = \['a', 'b', 'a'\]: lists level 'a' twice"):
        read_table(tmp_path / "w.csv", ["p"], "data.path", "w.csv", categorical={"w": ["a", "b", "a"]})
    with pytest.raises(DataError, match=r"not utf-16 text: the file holds no NUL bytes.* UTF-8 or another 8-bit encoding"):
        parse_table(tmp_path / "w.csv", "data.path", "w.csv", encoding="utf-16")


def test_non_ascii_column_names_are_written_as_utf_8(tmp_path, capsys):
    """A target and a text column named with an emoji: init's config names them as written, and validates
    (at 02070ed json.dumps wrote the emoji as two surrogate escapes, which PyYAML does not join)."""
    rows = ["größe,farbe 🎨,preis 😀"] + [f"{i},{'rot' if i % 2 else 'grün'},{2 * i}" for i in range(30)]
    (tmp_path / "e.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    cfg = tmp_path / "e.yaml"
    assert main(["init", "regression", "--csv", str(tmp_path / "e.csv"), "--out", str(cfg)]) == 0
    data = yaml.safe_load(cfg.read_text(encoding="utf-8"))["data"]
    assert data["target_columns"] == ["preis 😀"] and data["categorical"] == {"farbe 🎨": ["grün", "rot"]}
    _short(cfg)
    capsys.readouterr()
    assert main(["validate", str(cfg), "--no-estimate"]) == 0, capsys.readouterr().err
