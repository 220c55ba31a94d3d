#!/usr/bin/env python3
"""Generates accmond(8), accmon(1) and accmon-manifest(5) from their one source, packaging/man/accmon.man.md.

Usage: mkman.py SOURCE OUTDIR BINDIR VERSION DATE

Options and commands come from the built binaries' --help (BINDIR/accmond, BINDIR/accmon), so that the man pages
document exactly what the binaries accept. Writes OUTDIR/NAME.SECTION (uncompressed roff).
"""
import os
import re
import subprocess
import sys


def roff_escape(text):
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return text


def inline(text):
    """`code` -> bold, *text* -> italic, with roff escapes."""
    out = []
    for part in re.split(r"(`[^`]+`|\*[^*\s][^*]*\*)", text):
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append("\\fB" + roff_escape(part[1:-1]) + "\\fR")
        elif part.startswith("*") and part.endswith("*") and len(part) > 1:
            out.append("\\fI" + roff_escape(part[1:-1]) + "\\fR")
        else:
            out.append(roff_escape(part))
    line = "".join(out)
    if line.startswith(".") or line.startswith("'"):
        line = "\\&" + line
    return line


def help_text(bindir, command):
    words = command.split()
    result = subprocess.run(
        [os.path.join(bindir, words[0])] + words[1:] + ["--help"], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"mkman: {command} --help: exit {result.returncode}: {result.stderr.strip()}")
    return result.stdout.rstrip("\n")


def listed_commands(bindir, program):
    """The commands under "Commands:" in PROGRAM --help."""
    commands, inside = [], False
    for line in help_text(bindir, program).splitlines():
        if line.strip() == "Commands:":
            inside = True
        elif inside and re.match(r"^\s+[a-z][\w-]*\s", line):
            commands.append(line.split()[0])
        elif inside and line.strip() == "":
            break
    if not commands:
        sys.exit(f"mkman: {program} --help lists no commands")
    return commands


def verbatim(lines):
    return [".PP", ".RS 4", ".nf"] + [roff_escape(line) if not line.startswith(".") else "\\&" + roff_escape(line)
                                      for line in lines] + [".fi", ".RE"]


def render(page, lines, bindir, version, date):
    name, section, summary = page
    out = [f'.TH {name.upper()} {section} "{date}" "accmon {version}" "accmon"', ".SH NAME",
           f"{roff_escape(name)} \\- {roff_escape(summary)}"]
    i = 0
    in_code = False
    code = []
    while i < len(lines):
        line = lines[i]
        if in_code:
            if line.strip() == "```":
                out += verbatim(code)
                in_code, code = False, []
            else:
                code.append(line)
        elif line.strip() == "```":
            in_code = True
        elif line.startswith("# "):
            out.append(".SH " + roff_escape(line[2:].strip().upper()))
        elif (m := re.match(r"^@HELP (.+)@$", line.strip())):
            target = m.group(1)
            if target.endswith(" *"):
                program = target[:-2]
                for command in listed_commands(bindir, program):
                    out.append(".SS " + roff_escape(f"{program} {command}"))
                    out += verbatim(help_text(bindir, f"{program} {command}").splitlines())
            else:
                out += verbatim(help_text(bindir, target).splitlines())
        elif line.strip() == "":
            pass
        elif line.startswith("- "):
            out += [".IP \\(bu 2", inline(line[2:].strip())]
        elif i + 1 < len(lines) and lines[i + 1].startswith(": "):
            out += [".TP", inline(line.strip())]
            i += 1
            while i < len(lines) and lines[i].startswith(": "):
                out.append(inline(lines[i][2:].strip()))
                i += 1
            continue
        else:
            # A paragraph: this line and the following plain lines.
            paragraph = [line.strip()]
            while i + 1 < len(lines) and lines[i + 1].strip() and not re.match(r"^(# |- |```|@HELP|: )", lines[i + 1]) \
                    and not (i + 2 < len(lines) and lines[i + 2].startswith(": ")):
                i += 1
                paragraph.append(lines[i].strip())
            out += [".PP"] + [inline(text) for text in paragraph]
        i += 1
    if in_code:
        sys.exit(f"mkman: {name}({section}): unclosed ``` block")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    source, outdir, bindir, version, date = sys.argv[1:]
    text = open(source, encoding="utf-8").read()
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S).replace("@VERSION@", version).replace("@DATE@", date)
    pages, current = [], None
    for line in text.splitlines():
        if (m := re.match(r"^=== (\S+) (\d) \| (.+)$", line)):
            current = ((m.group(1), m.group(2), m.group(3).strip()), [])
            pages.append(current)
        elif current is not None:
            current[1].append(line)
    if not pages:
        sys.exit("mkman: no page in " + source)
    os.makedirs(outdir, exist_ok=True)
    for page, lines in pages:
        path = os.path.join(outdir, f"{page[0]}.{page[1]}")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(render(page, lines, bindir, version, date))
        print(path)


main()
