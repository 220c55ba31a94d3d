"""The configuration file and the command line: every problem as FILE:LINE:COLUMN (or the option), the exit
statuses, the credentials file's rules, and where ``accmon`` is found."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
from typing import List

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rig import ACCMON, DASHBOARD_ROOT

from accmon_dashboard.auth import AuthFileProblem, load_credentials
from accmon_dashboard.config import ConfigProblems, load
from accmon_dashboard.jsonpos import JSONProblem, parse
from accmon_dashboard.process import AccmonNotFound, find_accmon
from accmon_dashboard.settings import Settings, SettingsProblem, is_loopback, parse_listen


def write(directory: str, text: str, name: str = "dashboard.json") -> str:
    path = os.path.join(directory, name)
    with open(path, "w") as out:
        out.write(text)
    return path


def problems(path: str) -> List[str]:
    with pytest.raises(ConfigProblems) as caught:
        load(path)
    return caught.value.problems


def run(*arguments: str) -> "subprocess.CompletedProcess[str]":
    environment = dict(os.environ, PYTHONPATH=str(DASHBOARD_ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "accmon_dashboard", *arguments], capture_output=True, text=True,
                          env=environment, timeout=30)  # fmt: skip


def test_a_good_file_with_comments_and_trailing_commas(work: str) -> None:
    path = write(work, '// the lab\n{\n  "broker": "mqtt://broker", /* TLS later */\n  "events": 50,\n}\n')
    settings = load(path)
    assert settings.values == {"broker": "mqtt://broker", "events": 50}
    assert settings.origins["events"] == f"{path}:4:3"


def test_every_problem_with_its_line_and_column(work: str) -> None:
    path = write(work, '{\n  "listen": 8090,\n  "brokr": "mqtt://x",\n  "events": 0,\n  "password": "x",\n'
                       '  "title": "",\n  "hostName": "a\\u0001b"\n}\n')  # fmt: skip
    assert problems(path) == [
        f"{path}:2:13: listen: expected a string, not the number 8090",
        f"{path}:3:3: brokr: unknown key (did you mean 'broker'?)",
        f"{path}:4:13: events: 0 is out of range (from 1 to 10000)",
        f"{path}:5:3: password: a password does not go in this file, which every user may read: put it in a file "
        'only root and the service may read, and name that file in "passwordFile"',
        f"{path}:6:12: title: expected a value, not an empty string (leave the key out for the default)",
        f"{path}:7:15: hostName: control characters are not allowed here",
    ]


@pytest.mark.parametrize("text, where", [
    ('{"listen": "x",}}', "1:17: unexpected text after the value"),
    ('{\n  "a": 1\n  "b": 2\n}', "3:3: expected ',' or '}' after a member"),
    ('{"a": 01}', "1:7: '01': a number cannot start with 0"),
    ('{"a": 1, "a": 2}', "1:10: a: the key appears twice in this object"),
    ('{"a": "x\ny"}', "1:9: a control character in a string (write it as an escape such as \\n)"),
    ("[1, 2", "1:6: the file ends before the array opened at 1:1 is closed"),
    ('{"a": ', "1:7: the file ends where a value was expected"),
    ("/* open", "1:1: a /* comment is not closed"),
    ('{"a": tru}', "1:7: unexpected 't': expected a value"),
])  # fmt: skip
def test_syntax_errors_say_where(text: str, where: str, work: str) -> None:
    path = write(work, text)
    assert problems(path) == [f"{path}:{where}"]


def test_an_array_is_not_a_configuration_and_bytes_must_be_utf8(work: str) -> None:
    path = write(work, "[]")
    assert problems(path) == [f"{path}:1:1: expected an object {{...}} of settings"]
    binary = os.path.join(work, "binary.json")
    with open(binary, "wb") as out:
        out.write(b'{\n "title": "\xff"}')
    assert problems(binary) == [f"{binary}:2:12: not UTF-8"]
    assert problems(work) == [f"{work}: not a regular file"]


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=20))  # fmt: skip
def test_the_reader_agrees_with_json_on_what_json_writes(value: object) -> None:
    import json

    def plain(node: object) -> object:
        inner = getattr(node, "value")
        if isinstance(inner, dict):
            return {key: plain(child) for key, child in inner.items()}
        if isinstance(inner, list):
            return [plain(child) for child in inner]
        return inner

    for text in (json.dumps(value), json.dumps(value, indent=2)):
        assert plain(parse(text)) == value


def test_credentials_directory_in_file_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", "/run/credentials/accmon-dashboard.service")
    settings = Settings()
    settings.set("authFile", "${CREDENTIALS_DIRECTORY}/dashboard-auth", "--auth-file")
    settings.set("title", "${CREDENTIALS_DIRECTORY}", "--title")
    settings.check()
    assert settings.get("authFile") == "/run/credentials/accmon-dashboard.service/dashboard-auth"
    assert settings.get("title") == "${CREDENTIALS_DIRECTORY}"


def test_the_settings_combinations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)

    def check(**values: object) -> str:
        settings = Settings()
        for key, value in values.items():
            settings.set(key, value, f"--{key}")
        with pytest.raises(SettingsProblem) as caught:
            settings.check()
        return f"{caught.value.key}: {caught.value.reason}"

    assert check(host="lab-*") == "host: --host goes with --broker (the fleet view)"
    assert check(broker="http://x") == "broker: 'http://x': expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]"
    assert check(broker="mqtt://x", socket="/s") == "socket: --socket is for one host, not with --broker"
    assert check(broker="mqtt://x", key="k") == "certificate: --certificate and --key go together"
    assert check(broker="mqtt://x", passwordFile="p") == "passwordFile: --password-file needs --username"
    assert check(listen="8090").startswith("listen: '8090': expected ADDR:PORT")
    assert check(listen="::1:8090").startswith("listen: '::1:8090': write an IPv6 address in brackets")
    assert check(listen="lab:8090") == "listen: 'lab:8090': 'lab' is not an IP address (or localhost)"
    assert check(authFile="${CREDENTIALS_DIRECTORY}/auth").startswith("authFile: ${CREDENTIALS_DIRECTORY} is not set")
    assert parse_listen("[::1]:0") == ("::1", 0)
    assert [is_loopback(a) for a in ("127.0.0.1", "127.3.2.1", "::1", "localhost", "0.0.0.0", "::", "10.0.0.1")] == [
        True, True, True, True, False, False, False]  # fmt: skip


def test_the_command_line_exit_statuses(work: str) -> None:
    result = run("--frobnicate")
    assert result.returncode == 64 and result.stderr.startswith("Error: unrecognized arguments: --frobnicate\nusage:")
    assert "See 'accmon-dashboard --help'" in result.stderr
    result = run("--password", "x")
    assert result.returncode == 64 and "visible to every user" in result.stderr
    result = run("--config", os.path.join(work, "absent.json"))
    assert result.returncode == 65 and "absent.json: cannot open it: No such file or directory" in result.stderr
    empty = write(work, "{}")
    result = run("--config", empty, "--accmon", os.path.join(work, "no-accmon"))
    assert result.returncode == 69 and "is not an executable file" in result.stderr
    result = run("--config", empty, "--events", "0")
    assert result.returncode == 64 and "--events: 0 is out of range" in result.stderr
    config = write(work, '{"broker": "mqtt://broker", "listen": "127.0.0.1:9"}')
    result = run("--config", config, "--accmon", ACCMON, "--listen", "127.0.0.1:8091", "--check")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (f"ok: the fleet on mqtt://broker, through {ACCMON}; listen 127.0.0.1:8091; "
                             "credentials: none\n")  # fmt: skip
    assert run("--version").stdout.startswith("accmon-dashboard ")


def test_credentials_files(work: str) -> None:
    path = write(work, "# comment\n\nwall:0123456789abcdef\n0123456789abcdefXYZ\n", "auth")
    os.chmod(path, 0o640)
    credentials = load_credentials(path)
    token = "Bearer 0123456789abcdefXYZ"
    assert credentials.accepts(token) and credentials.accepts(token.lower().replace("xyz", "XYZ"))
    assert credentials.accepts("Basic " + base64.b64encode(b"wall:0123456789abcdef").decode())
    assert credentials.accepts("Basic " + base64.b64encode(b"x:0123456789abcdefXYZ").decode())
    for wrong in (None, "", "Bearer", "Bearer 0123456789abcdef", "Basic !!!", "Basic " + base64.b64encode(b"wall").decode(),
                  "Basic " + base64.b64encode(b"wall:0123456789abcdeF").decode(), "Digest x"):  # fmt: skip
        assert not credentials.accepts(wrong), wrong
    for text, reason in (("short\n", "line 1: a token is shorter than 16 characters"),
                         ("a:b\n", "line 1: the password of 'a' is shorter than 16 characters"),
                         (":0123456789abcdef0\n", "line 1: NAME:PASSWORD with an empty name"),
                         ("# nothing\n", "it holds no credential")):  # fmt: skip
        bad = write(work, text, "bad")
        os.chmod(bad, 0o600)
        with pytest.raises(AuthFileProblem) as caught:
            load_credentials(bad)
        assert str(caught.value).startswith(reason)
    with pytest.raises(AuthFileProblem, match="cannot open it: No such file"):
        load_credentials(os.path.join(work, "absent"))


def test_accmon_is_found_as_given_beside_the_program_or_on_path(work: str, monkeypatch: pytest.MonkeyPatch) -> None:
    beside = os.path.join(work, "bin")
    os.makedirs(beside)
    program = os.path.join(beside, "accmon-dashboard")
    for path in (program, os.path.join(beside, "accmon")):
        write(beside, "#!/bin/sh\n", os.path.basename(path))
        os.chmod(path, stat.S_IRWXU)
    assert find_accmon(ACCMON, program) == ACCMON
    assert find_accmon(None, program) == os.path.join(beside, "accmon")
    elsewhere = os.path.join(work, "elsewhere", "accmon-dashboard")
    os.makedirs(os.path.dirname(elsewhere))
    monkeypatch.setenv("PATH", beside)
    assert find_accmon(None, elsewhere) == os.path.join(beside, "accmon")
    monkeypatch.setenv("PATH", os.path.join(work, "empty"))
    with pytest.raises(AccmonNotFound, match="not on PATH; install the accmon package or name it with --accmon"):
        find_accmon(None, elsewhere)
    with pytest.raises(AccmonNotFound, match="is not an executable file"):
        find_accmon(os.path.join(work, "nothing"), elsewhere)


def test_json_problem_positions_are_one_based() -> None:
    with pytest.raises(JSONProblem) as caught:
        parse("\n\n   ]")
    assert (caught.value.line, caught.value.column) == (3, 4)
