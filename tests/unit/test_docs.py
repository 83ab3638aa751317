"""The docs lead somewhere: every relative link in README.md, CHANGELOG.md and docs/ resolves
(to a file, and to a heading where it names one), every repository file, test and module they
name in backticks exists, docs/ARCHITECTURE.md's Layout picture is the folder tree, and docs/
holds no file over 100 KB."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
README_MAX_LINES = 250
# docs/ is read on GitHub and in every clone: a machine's raw figures (580 KB once) or a
# screenshot saved as captured (140 KB) do not belong there.
DOCS_FILE_MAX_BYTES = 100 * 1024

# What a path in backticks must start with to be read as a file of this repository (outputs
# such as results/gpu.md and placeholders such as exports/RUN_ID/ are not files of it).
REPO_ROOTS = ("benchmarks", "optimizers", "dashboard", "pages", "tools", "tests", "docs",
              "models", ".streamlit")
TOP_FILES = ("app.py", "serve.py", "Makefile", "pyproject.toml", "requirements.txt",
             "requirements-dev.txt", "README.md", "CHANGELOG.md")
_ROOTS = "|".join(re.escape(r) for r in REPO_ROOTS)
_TOP = "|".join(re.escape(f) for f in TOP_FILES)
PATH = re.compile(rf"^(?:(?:{_ROOTS})/[\w./-]*|{_TOP})$")
MODULE = re.compile(r"^(?:benchmarks|optimizers|dashboard|tools)(?:\.\w+)+$")
LINK = re.compile(r"!?\[(?:[^\]\n]|\n(?!\n))*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^(```|~~~)")


def prose(text: str) -> str:
    """The text outside fenced code blocks (commands and pictures there are not links)."""
    kept, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        kept.append("" if fenced else line)
    return "\n".join(kept)


def fenced_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(line number of the opening fence, the block's lines) of every fenced block."""
    blocks, current, start = [], None, 0
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.strip()):
            if current is None:
                current, start = [], number
            else:
                blocks.append((start, current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text only
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in prose(path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def where(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


def test_every_relative_link_resolves():
    problems = []
    for doc in DOCS:
        for target in LINK.findall(prose(doc.read_text(encoding="utf-8"))):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, fragment = target.partition("#")
            linked = (doc.parent / file_part).resolve() if file_part else doc
            if not linked.exists():
                problems.append(f"{where(doc)}: link {target} -> {file_part} does not exist")
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
                problems.append(f"{where(doc)}: link {target}: no heading #{fragment} in "
                                f"{where(linked)}")
    assert not problems, "\n".join(problems)


def _defines(module: Path, name: str) -> bool:
    text = module.read_text(encoding="utf-8")
    return re.search(rf"^\s*(?:async\s+def|def|class)\s+{name}\b|^\s*{name}\s*[:=]|"
                     rf"^(?:from\s+\S+\s+)?import\s.*\b{name}\b", text, re.MULTILINE) is not None


def _module_problem(dotted: str) -> str | None:
    """None when ``dotted`` names a package, a module, or a name a module defines."""
    parts = dotted.split(".")
    path = ROOT / parts[0]
    for i, part in enumerate(parts[1:], 1):
        if (path / part).is_dir():
            path = path / part
        elif (path / f"{part}.py").is_file():
            path = path / f"{part}.py"
            rest = parts[i + 1:]
            if rest and not _defines(path, rest[0]):
                return f"{'.'.join(parts[:i + 1])} defines no {rest[0]}"
            return None
        else:
            init = path / "__init__.py"
            if init.is_file() and _defines(init, part):
                return None
            return f"no module or name {'.'.join(parts[:i + 1])}"
    return None


def _named_problem(token: str) -> str | None:
    token = token.strip("(),;.")
    called = token.split("(")[0]  # name(args): the name
    if MODULE.match(called):
        return _module_problem(called)
    file_part, _, test = token.partition("::")
    if not test:
        file_part = re.sub(r"(\.py):\w+$", r"\1", file_part)  # FILE.py:FACTORY
    if not PATH.match(file_part):
        return None
    path = ROOT / file_part
    if not path.exists():
        return f"{file_part} does not exist"
    if test:
        name = test.split("[")[0]
        if not _defines(path, name):
            return f"{file_part} has no test {name}"
    return None


def test_every_file_test_and_module_named_exists():
    problems = []
    for doc in DOCS:
        for span in CODE_SPAN.findall(prose(doc.read_text(encoding="utf-8"))):
            for token in span.split():
                problem = _named_problem(token)
                if problem:
                    problems.append(f"{where(doc)}: `{span}`: {problem}")
    assert not problems, "\n".join(sorted(set(problems)))


# -- the architecture's picture is the folder tree ---------------------------------------------

PICTURED = ("benchmarks", "optimizers", "dashboard", "tools")  # every module named
DESCRIBED_AS_A_WHOLE = ("benchmarks/cli",)  # its modules are described, not listed
CONTINUATION_INDENT = 16  # a wrapped description, not an entry


def layout_picture() -> list[str]:
    """The repository paths docs/ARCHITECTURE.md's Layout picture lists, in order."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    start = text.index("## Layout")
    section_line = text[:start].count("\n") + 1
    block = next(lines for number, lines in fenced_blocks(text) if number > section_line)
    paths, stack = [], []
    for line in block:
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= CONTINUATION_INDENT:
            continue
        level = indent // 2
        names = re.split(r"\s{2,}", line.strip())[0]
        stack = stack[:level]
        for name in (n.strip() for n in names.split(",")):
            paths.append("/".join([*stack, name.rstrip("/")]))
        if names.endswith("/"):
            stack.append(names.rstrip("/"))
    return paths


def test_the_layout_picture_is_the_folder_tree():
    pictured = layout_picture()
    assert "benchmarks/run/runner.py" in pictured and "optimizers/registry.py" in pictured
    missing = [p for p in pictured if not (ROOT / p).exists()]
    modules = sorted(str(p.relative_to(ROOT)) for top in PICTURED
                     for p in (ROOT / top).rglob("*.py")
                     if p.name != "__init__.py" and "__pycache__" not in p.parts)
    unlisted = [m for m in modules if m not in pictured
                and not m.startswith(tuple(d + "/" for d in DESCRIBED_AS_A_WHOLE))]
    assert not missing, f"pictured but not in the tree: {missing}"
    assert not unlisted, f"in the tree but not pictured: {unlisted}"


def test_the_readme_is_a_landing_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES})"


def test_nothing_names_a_file_outside_the_repository():
    """The product and its docs stand alone: no reference to the design notes it started from
    (DESIGN.md, STYLE.md) or to a folder beside the checkout."""
    outside = re.compile(r"\b(?:DESIGN|STYLE)\.md\b|\.\./shared\b")
    files = [*DOCS, *(p for root in ("benchmarks", "optimizers", "dashboard", "pages", "tools",
                                      "tests") for p in (ROOT / root).rglob("*.py")),
             ROOT / "app.py", ROOT / "serve.py"]
    found = [f"{p.relative_to(ROOT)}:{n}" for p in files
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if outside.search(line) and p != Path(__file__)]
    assert not found, found


DOTTED = re.compile(r"\b((?:benchmarks|dashboard|optimizers|tools)(?:\.[A-Za-z_]\w*)+)")


def _dotted_resolves(name: str) -> bool:
    """A module, a module's attribute (defined, assigned or imported in its source) or a
    package's module; an upper-case last part is a placeholder (``kinds.NAME``)."""
    import importlib.util
    parts = name.split(".")
    if parts[-1].isupper():
        parts = parts[:-1]
    for k in range(len(parts), 0, -1):
        try:
            spec = importlib.util.find_spec(".".join(parts[:k]))
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        if k == len(parts):
            return True
        attr = parts[k]
        if spec.submodule_search_locations and any(
                (Path(folder) / f"{attr}.py").exists() or (Path(folder) / attr).is_dir()
                for folder in spec.submodule_search_locations):
            return True
        source = Path(spec.origin).read_text() if (spec.origin or "").endswith(".py") else ""
        return bool(re.search(rf"^\s*(?:async def|def|class) {attr}\b|^{attr}\s*[:=]"
                              rf"|^\s+{attr},?$|import .*\b{attr}\b", source, re.M))
    return False


def test_every_dotted_name_in_code_and_docs_resolves():
    """Issue 33.4: a comment or a doc naming ``benchmarks.peaks.peaks_key`` after the module
    moved to ``benchmarks.measure`` sends a reader nowhere."""
    files = [*DOCS, *(p for root in ("benchmarks", "optimizers", "dashboard", "pages", "tools")
                      for p in (ROOT / root).rglob("*.py")), ROOT / "app.py"]
    stale = {}
    for path in files:
        for match in DOTTED.finditer(path.read_text(encoding="utf-8")):
            name = match.group(1)
            if name.split(".")[-1] in ("py", "md", "json", "txt", "html", "toml"):
                continue
            if not _dotted_resolves(name):
                stale.setdefault(name, str(path.relative_to(ROOT)))
    assert not stale, stale


def test_make_screenshots_takes_every_image_the_docs_show():
    """`make screenshots` (tools/screenshots.py) regenerates every image README.md and the
    topic pages (docs/*.md) show from the real app, and takes none that nothing shows (issue
    32.18). docs/generated/ holds what make perf writes, its charts included."""
    from tools.screenshots import IMAGES
    shown = set()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in LINK.findall(prose(doc.read_text())):
            path = target.split("#")[0]
            if "://" not in path and Path(path).suffix.lower() in {".png", ".jpg", ".jpeg",
                                                                    ".gif", ".svg", ".webp"}:
                shown.add((doc.parent / path).resolve().relative_to(ROOT).as_posix())
    assert shown, "no image found: the link pattern no longer reads the docs"
    assert shown == set(IMAGES), (shown, set(IMAGES))
    assert re.search(r"^screenshots:.*\n\t.*tools\.screenshots", (ROOT / "Makefile").read_text(),
                     re.M)


def test_no_file_in_docs_exceeds_100_kb():
    """Issue 47.7: docs/ held 843 KB of one machine's reports. One report per CPU kind stays
    (make perf writes the rest again, its raw figures into results/), and images are saved
    small (tools/screenshots.py's small_png)."""
    big = {str(p.relative_to(ROOT)): p.stat().st_size for p in (ROOT / "docs").rglob("*")
           if p.is_file() and p.stat().st_size > DOCS_FILE_MAX_BYTES}
    assert not big, f"over {DOCS_FILE_MAX_BYTES // 1024} KB in docs/: {big}"


def test_a_screenshot_is_saved_small_and_the_same_picture(tmp_path):
    """make screenshots saves a page's capture as a 256-colour palette when that changes no
    channel by more than PALETTE_TOLERANCE, and keeps full colour when it would."""
    from PIL import Image, ImageChops, ImageDraw

    from tools.screenshots import PALETTE_TOLERANCE, small_png
    page = Image.new("RGB", (400, 200), (255, 255, 255))
    draw = ImageDraw.Draw(page)
    for i in range(12):  # text's anti-aliasing: many near-greys, as on a real page
        draw.text((10, 10 + 15 * i), f"Accuracy change +0.{i:02d} pts, 95% CI", fill=(49, 51, 63))
    draw.rectangle((300, 20, 380, 180), fill=(255, 75, 75), outline=(0, 104, 201))
    shot = tmp_path / "page.png"
    page.save(shot)
    small_png(shot)
    with Image.open(shot) as saved:
        assert saved.mode == "P"
        worst = max(high for _, high in
                    ImageChops.difference(page, saved.convert("RGB")).getextrema())
    assert worst <= PALETTE_TOLERANCE

    ramp = Image.new("RGB", (256, 256))
    ramp.putdata([(x, y, (x + y) // 2) for y in range(256) for x in range(256)])
    photo = tmp_path / "ramp.png"
    ramp.save(photo)
    small_png(photo)
    with Image.open(photo) as saved:
        assert saved.mode == "RGB"
        assert ImageChops.difference(ramp, saved).getbbox() is None
