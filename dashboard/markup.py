"""Text is never markup (issue 31.2): the one helper every page uses before a string it did not
write itself (a link's parameter, a file or model name, a class name, a stored row, an error)
reaches anything Streamlit renders as Markdown.

``st.markdown``, ``st.caption``, the alerts (``st.warning``/``error``/``info``/``success``),
headings, ``st.table``'s cells and widget labels all render GitHub-flavoured Markdown with
Streamlit's additions (``:red[...]`` colour directives, ``$...$`` LaTeX): a name such as
``[Sign in](https://evil.example)`` or ``![p](http://host/x.png)`` would draw a link inside the
app's own warning, or make the viewer's browser fetch an image from a host the link chose.
``md`` backslash-escapes what can start markup (CommonMark lets any ASCII punctuation be
escaped, and an escaped character is always literal text): ``\ ` * [ ] < $ ~ | { } &``,
an ``_`` at a word's edge (inside a word it never emphasises) and what would begin a heading,
a list item, a rule or a quote (``# ``, ``- ``, ``+ ``, ``---``, ``>``, ``1. ``); line breaks
fold into spaces. What Streamlit finds in the text itself, after escapes are undone
(GitHub's autolinked ``https://``, ``www.`` and e-mail addresses; a ``:name`` directive,
which swallows the word; ``:emoji:`` and ``:material/icon:`` shortcodes), is broken by a
zero-width space after the ``:`` or ``@`` (or before ``www``'s dot). So no link, image, emphasis, HTML,
entity, directive (``:red[...]``), maths, icon or autolinked URL can start, and ordinary text
(a name, a path, an error) reads as it was.

``relative_names`` names a file of the operator's models or data folder relative to that
folder (``se_net.py:build``, ``imagefolder:flowers``): what the page listed, never where the
server keeps it; every page shows model and data set names through it. ``no_paths`` is what a
person who does not own a run sees of an error, and what the Experiment page shows of any: those
names relative, every other server path (an upload's folder and file name) replaced by a
placeholder.
"""

from __future__ import annotations

import re
from pathlib import Path

# ``>`` only where it starts a line (a quote: _LEADING); with ``<`` escaped nothing inside a
# line can be closed by it ("must be an integer >= 1" reads as written, in the source too).
_ALWAYS = re.compile(r"([\\`*\[\]<$~|{}&])")
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# Found in the text itself, after escapes are undone (GitHub's autolinked URLs and e-mail
# addresses, emoji and icon shortcodes): broken by a zero-width space, which reads the same.
_IN_TEXT = re.compile(r"(?i)(?<=:)(?=//|[a-z])|(?<=\bwww)(?=\.)|(?<=@)")
ZERO_WIDTH = "\u200b"
# What makes a line a heading, a list item, a rule or a quote (``--flag`` is none of them).
_LEADING = re.compile(r"^(\s*)(#{1,6}(?=\s|$)|[-+](?=\s|$)|-{3,}|>|\d{1,9}(?=[.)](?:\s|$)))")
# An absolute path: a slash not inside a word, a number, a URL (``1/2``, ``p50/p90``,
# ``https://...``), then at least one more component.
_PATH = re.compile(r"(?<![\w.:/~\\])/(?:[^\s/'\"`,;()\[\]]+/)+[^\s/'\"`,;()\[\]]*")
HIDDEN_PATH = "(a server path)"


def md(value) -> str:
    """``value`` as literal text inside Markdown."""
    text = "" if value is None else " ".join(str(value).split())
    text = _ALWAYS.sub(r"\\\1", text)
    text = _EDGE_UNDERSCORE.sub(r"\\_", text)
    text = _IN_TEXT.sub(ZERO_WIDTH, text)
    return _LEADING.sub(_leading, text, count=1)


def _leading(match) -> str:
    space, marker = match.groups()
    if marker[0].isdigit():  # "1." or "1)": the list marker is the punctuation after it
        return space + marker + "\\"
    return space + "\\" + marker


def _operator_folders() -> list[str]:
    """The models and data folders' paths, as configured and resolved, longest first."""
    from benchmarks.spec.folders import data_dir
    from benchmarks.zoo.models import models_dir
    folders = set()
    for folder in (models_dir(), data_dir()):
        folder = Path(folder).expanduser()
        folders.update({str(folder).rstrip("/"), str(folder.resolve()).rstrip("/")})
    return sorted((f for f in folders if f), key=len, reverse=True)


def relative_names(text) -> str:
    """``text`` with every path inside the operator's models or data folder named relative to
    that folder (``/srv/models/se_net.py:build`` reads ``se_net.py:build``)."""
    text = "" if text is None else str(text)
    if "/" not in text:
        return text
    for folder in _operator_folders():
        text = text.replace(folder + "/", "")
    return text


def no_paths(text) -> str:
    """``text`` with the operator's folders' files named relative to them and every other
    absolute path replaced by ``HIDDEN_PATH``."""
    def hidden(match) -> str:  # the sentence's own punctuation after a path stays
        path = match.group(0)
        return HIDDEN_PATH + path[len(path.rstrip(":.")):]
    return _PATH.sub(hidden, relative_names(text))


def no_paths_in(value):
    """A JSON-like value (a run's environment, a variant's config) with the paths in its
    strings hidden, for a viewer who does not own the run."""
    if isinstance(value, dict):
        return {key: no_paths_in(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [no_paths_in(item) for item in value]
    return no_paths(value) if isinstance(value, str) else value


def without_paths(run: dict) -> dict:
    """A stored run as someone who does not own it sees it (its page and its downloads): its
    environment, settings, errors and recipe without the server's paths; figures untouched."""
    out = dict(run)
    for key in ("environment", "spec"):
        if isinstance(run.get(key), dict):
            out[key] = no_paths_in(run[key])
    if run.get("error"):
        out["error"] = no_paths(run["error"])
    out["variants"] = [{**v, "error": no_paths(v["error"])} if v.get("error") else v
                       for v in run.get("variants") or []]
    block = run.get("recommendation")
    if isinstance(block, dict) and isinstance(block.get("recipe"), dict):
        recipe = block["recipe"]
        out["recommendation"] = {**block, "recipe": {**recipe, "command": no_paths(
            recipe.get("command"))}}
    return out


def shown_error(text, own: bool) -> str:
    """An error as Markdown text: its owner sees it whole (the operator's folders' files by
    their names there), anyone else without server paths."""
    return md(relative_names(text) if own else no_paths(text))
