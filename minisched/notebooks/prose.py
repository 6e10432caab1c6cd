"""Prose check: every measured figure a markdown cell states is one the notebook itself shows.

A *figure* is found in a markdown cell's text (after the parts listed under "not figures" are cut
away) and is one of:

- a number with a unit: time (ns, µs/μs/us, ms, s, sec, seconds, min, minutes, h, hours and the
  spelled-out units; "s", "h", "min" and "sec" only after a space, so "503s" is a status code),
  size (B, bytes, KiB, MiB, GiB, TiB, kB/KB, MB, GB, TB, and Kubernetes' Ki, Mi, Gi, Ti), a rate (anything
  `/s` such as `pods/s`, `ops/s`, `/s`, or "per second", with an optional k/M/G prefix), a
  percentage (`%`, "percent"), a ratio (`×`, `5x`, "times");
- a count of measured things: a number followed (at most two words later) by a plural noun of
  `COUNT_NOUNS` (pods, nodes, lines, layers, edges, changes, ticks, collections, rounds, ...); a
  number word ("two" to "twenty", "thirty", ..., "hundred") only before a noun of `EVENT_NOUNS`,
  things that happen and get counted ("three changes", "fourteen lines"), not parts of a design
  ("three layers", "two backends");
- a number after a statistic's name (p50, p99, median, mean, average, max, min): "p99 of 4.88";
- a magnitude in words: "a few / several / tens of / dozens of / hundreds of / thousands of"
  followed by a time or size unit ("tens of microseconds" means 10 to 100 µs).

Ranges and lists share their unit and every end is a figure: "19–37 µs", "19 to 37 µs",
"between 19 and 37 µs", "2, 12 and 6 nodes". A list of three or more numbers is data even with
no unit or noun after it ("the shares came out 2, 12 and 6"): each is a count.

A figure is *shown* when one of these holds:

1. some output of the notebook (stdout/stderr streams, text/plain, text/markdown, text/html with
   its tags removed; not error tracebacks, not images) holds a number that equals it within the
   figure's own rounding, unit-aware: "0.11 ms" is shown by `110 µs`, by `0.000110 s`, or by a
   unitless `0.11` (a table with the unit in its header) or a unitless value in the base unit
   (seconds, bytes); a percentage also by the fraction (`0.95` for 95%); thousands separators
   (`12,400`, `12_400`, thin spaces) are read as one number. A number printed with a unit of
   another kind, or with a noun, shows nothing ("5 pods" does not show "5 ms"); counts and
   statistics compare with every number. Rounding: "12.5" is shown by 12.47
   and 12.54 (half a unit of the last digit written), never by 12.56; "12" is not shown by 12.54.
   After an approximation word ("about", "around", "roughly", "nearly", "almost", "some", "~",
   "≈") an integer's trailing zeros are rounding too: "about 1,400" is shown by 1,437.
   After a bound ("over", "more than", "above", "at least", "under", "less than", "below",
   "at most", "up to", "within") a value on the stated side and within a factor of 10 shows it.
   A magnitude in words is shown by an output value of the same dimension in its range, printed
   by the code cell just before the markdown cell or the one just after it (the cells it
   describes: a "tens of µs" elsewhere in the notebook does not make this sentence true).
   "costs/takes/adds microseconds" (a unit word with no number) means 1 to 100 of it (260 µs is
   "hundreds of microseconds", not "microseconds").
   Counts compare with any number of any unit in the outputs (they are integers).
2. a code cell's source holds the number (it is an input the notebook chose: `N = 100_000`,
   `seconds=0.6`, `TickerLateness(0.010)` for "every 10 ms"), compared the same way as a unitless
   output (in the figure's unit or the base unit); `10**6` and `1e6` are read as numbers.
3. the sentence carries the visible tag `*(quoted: SOURCE)*` (a figure the notebook did not
   compute: the book's, a reference's, `bench/`'s with the file named). A tag standing at the
   start of a sentence also covers the sentence before it ("... 10 µs. *(quoted: the book)*").
   A tag in any other sentence exempts nothing; an HTML comment is not visible and is no tag.

Not figures (cut away before looking): inline code and fenced code, LaTeX math (`$...$`), link
targets and URLs, HTML tags and comments, the quoted tag's own text, section references (§2.1,
"section 3.3"), numbers glued to letters or dots (p99, python3.13t, v0.8.0, 1.35.4, k8s), and
every number without a unit, count noun or statistic before it: years, versions ("Go 1.14",
"Kubernetes 1.35"), section numbers ("Part I 4.1"), plain small counts ("three settings").

Sentences are split at `.`, `!`, `?` followed by a space and an upper-case letter or a mark
(abbreviations such as "e.g." and "i.e." do not split), at paragraph breaks, list items, headings
and table rows. Each failure names the cell's index, the figure and the sentence.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

QUOTED_TAG = re.compile(r"\*\(quoted:\s*[^\n]+?\)\*")

# --- units ----------------------------------------------------------------------------------

# unit word -> (dimension, scale to the base unit, alternative scales)
_TIME = {
    "ns": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
    "µs": 1e-6, "μs": 1e-6, "us": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "ms": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
}  # fmt: skip
_SIZE: dict[str, tuple[float, ...]] = {
    "B": (1.0,), "byte": (1.0,), "bytes": (1.0,),
    "KiB": (1024.0,), "MiB": (1024.0**2,), "GiB": (1024.0**3,), "TiB": (1024.0**4,),
    # writers use the decimal names for either meaning
    "kB": (1e3, 1024.0), "KB": (1e3, 1024.0), "MB": (1e6, 1024.0**2), "GB": (1e9, 1024.0**3),
    "TB": (1e12, 1024.0**4),
    # Kubernetes quantities, as chapters write requests and capacities ("512Mi", "16Gi")
    "Ki": (1024.0,), "Mi": (1024.0**2,), "Gi": (1024.0**3,), "Ti": (1024.0**4,),
}  # fmt: skip
_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}


def _words(text: str) -> list[str]:
    return text.split()


# Plural nouns only: "410 relist" and "200 OK" are status codes, "1 pod" is no measurement.
COUNT_NOUNS = frozenset(
    _words("""pods nodes lines layers edges changes writes events ticks collections rounds cycles calls
    attempts replicas bindings decisions items objects requests retries threads workers shards errors
    failures conflicts restarts samples runs iterations updates deletes deletions elements entries
    allocations keys edits modules imports violations cells messages wake-ups wakeups tickers spans
    records transitions states goroutines tasks jobs drops evictions preemptions victims gangs members
    bins frames leases handoffs lookups reads commits watches relists resyncs misses hits instances
    plugins periods""")
)
# A number word ("three") is a figure only before one of these: things that happen and are counted,
# not parts of a design ("three layers", "two backends").
EVENT_NOUNS = frozenset(
    _words("""changes writes events lines ticks collections rounds cycles calls attempts edits edges
    updates deletes retries restarts errors failures conflicts wake-ups wakeups transitions samples
    drops evictions preemptions relists misses hits requests decisions bindings periods""")
)
_NUMBER_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
}  # fmt: skip
_MAGNITUDES = {
    "a few": (1.0, 10.0), "several": (2.0, 10.0), "tens of": (10.0, 100.0), "dozens of": (24.0, 100.0),
    "hundreds of": (100.0, 1000.0), "thousands of": (1000.0, 1e6),
}  # fmt: skip
_APPROX = ("about", "around", "roughly", "nearly", "almost", "some", "approximately", "~", "≈", "close to")
_LOWER_BOUND = ("over", "more than", "above", "at least", "exceeds", "beyond")
_UPPER_BOUND = (
    "under", "less than", "below", "at most", "up to", "within", "no more than", "never more than",
    "not more than", "never over", "never above",
)  # fmt: skip
_STATISTICS = (
    "p50",
    "p90",
    "p95",
    "p99",
    "p999",
    "p99.9",
    "median",
    "mean",
    "average",
    "max",
    "maximum",
    "min",
    "minimum",
)

# A number as written: 12,400 | 12_400 | 12 400 (thin spaces) | 0.11 | 1.5e6 | .5 is not a number
_NUM = r"\d{1,3}(?:[,_\u2009\u202f]\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
_NUM_WORD = "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))
_TIME_UNITS = "|".join(sorted((re.escape(u) for u in _TIME), key=len, reverse=True))
_SIZE_UNITS = "|".join(sorted((re.escape(u) for u in _SIZE), key=len, reverse=True))
# a unit: rate first (so "pods/s" is not read as a count), then time, size, percent, ratio
_UNIT = (
    rf"(?P<rate>(?P<rprefix>[kKMG])?\s?(?P<rnoun>[A-Za-z]+)?/s(?![A-Za-z])|(?:[A-Za-z]+\s)?per\s(?:second|sec)\b)"
    rf"|(?P<time>(?:{_TIME_UNITS})(?![\w/])(?<!\d[sh])(?<!\dmin)(?<!\dsec))"
    rf"|(?P<size>(?:{_SIZE_UNITS})(?![\w/]))"
    r"|(?P<pct>%|\s?percent\b|\s?per cent\b)"
    r"|(?P<ratio>×|x(?![\w])|\s(?:times)\b)"
)
_SEP = r"\s*(?:–|—|-|to|and|or|,|, and|, or)\s*"
_FIGURE = re.compile(
    rf"(?<![\w.§/\-^])(?P<nums>(?:{_NUM})(?:{_SEP}(?:{_NUM}))*)(?P<prefix>[kKM](?=\s?[A-Za-z]*/s))?"
    rf"(?P<space>\s?)(?:{_UNIT})"
)
_COUNT = re.compile(
    rf"(?<![\w.§/\-^])(?P<nums>(?:{_NUM}|{_NUM_WORD})(?:{_SEP}(?:{_NUM}|{_NUM_WORD}))*)"
    r"\s+(?P<between>(?:[\w\-]+\s+){0,2}?)"
    r"(?P<noun>" + "|".join(sorted(map(re.escape, COUNT_NOUNS), key=len, reverse=True)) + r")(?![\w\-])",
    re.IGNORECASE,
)
# "came out 2, 12 and 6": three or more numbers listed are data even without a noun
_LIST = re.compile(
    rf"(?<![\w.§/\-^])(?P<nums>(?:{_NUM})(?:,\s+(?:{_NUM}))+,?\s+(?:and|or)\s+(?:{_NUM}))(?!\w|\.\d)"
)
_STAT = re.compile(
    r"\b(?P<stat>" + "|".join(re.escape(s) for s in _STATISTICS) + r")\b\s*(?:of|=|:|is|was|at|around)?\s*"
    rf"(?P<nums>{_NUM})(?!\w|\.\d)(?!\s?(?:{_TIME_UNITS}|{_SIZE_UNITS}|%|×|x\b|/s))",
    re.IGNORECASE,
)
_MAGNITUDE = re.compile(
    r"(?i:\b(?P<mag>"
    + "|".join(re.escape(m) for m in _MAGNITUDES)
    + r"|(?P<verb>costs?|takes?|took|adds?|lasts?))\s+)"
    rf"(?P<unit>{_TIME_UNITS}|{_SIZE_UNITS})(?![\w/])"
)
_SECTION = re.compile(
    r"§\s*\d+(?:\.\d+)*|\b(?:section|sections|chapter|chapters|part|§§)\s+[IVX\d]+(?:\.\d+)*", re.IGNORECASE
)
_NUMBER_IN_TEXT = re.compile(rf"(?<![\w.])(?:{_NUM})(?![\d])")


@dataclass(frozen=True)
class Figure:
    """One figure in prose: `value` in `unit`'s own scale, with the tolerance its writing allows."""

    text: str  # as written, e.g. "19–37 µs"
    value: float
    dimension: str  # time | size | rate | pct | ratio | count | stat | magnitude
    scales: tuple[float, ...]  # the unit's scale(s) to the base unit
    tolerance: float  # in the figure's own unit
    bound: str = ""  # "" | "lower" | "upper" | "range" (a magnitude in words: value..upper)
    upper: float = 0.0
    number: str = ""  # the one number of `text` this figure is (a range has two)


@dataclass
class ProseProblem:
    cell: int
    figure: str
    sentence: str
    why: str = "no output shows it and no code cell sets it"

    def __str__(self) -> str:
        return f"cell {self.cell}: {self.figure!r} — {self.why}; sentence: {self.sentence!r}"


@dataclass
class _Shown:
    """What a notebook shows: numbers by dimension, in base units, plus every number as written."""

    by_dimension: dict[str, list[float]] = field(default_factory=dict)
    plain: list[float] = field(default_factory=list)  # every number as written, any unit or none
    unitless: list[float] = field(default_factory=list)  # the numbers printed without a unit
    code: list[float] = field(default_factory=list)


def _to_float(text: str) -> float:
    return float(re.sub(r"[,_\u2009\u202f]", "", text))


def _decimals(text: str) -> int:
    mantissa = re.sub(r"[eE].*", "", text)
    return len(mantissa.split(".", 1)[1]) if "." in mantissa else 0


def _rounding(text: str, approximate: bool) -> float:
    tolerance = 0.5 * 10.0 ** -_decimals(text)
    if "e" in text.lower():
        exponent = int(re.sub(r".*[eE]", "", text))
        tolerance *= 10.0**exponent
    digits = re.sub(r"[,_\u2009\u202f]", "", text)
    if approximate and "." not in digits and digits.rstrip("0") and len(digits) > 1:
        zeros = len(digits) - len(digits.rstrip("0"))
        tolerance = max(tolerance, 0.5 * 10.0**zeros)
    return tolerance


def _strip_non_prose(markdown: str) -> str:
    """The markdown with everything that is not a figure of prose blanked out (offsets kept)."""

    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    text = re.sub(r"```.*?```|~~~.*?~~~", blank, markdown, flags=re.DOTALL)
    text = re.sub(r"<!--.*?-->", blank, text, flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`", blank, text)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]+\$", blank, text, flags=re.DOTALL)
    text = re.sub(r"\]\([^)\s]*\)", blank, text)
    text = re.sub(r"https?://\S+", blank, text)
    text = re.sub(r"<[^>\n]+>", blank, text)
    text = QUOTED_TAG.sub(blank, text)
    text = _SECTION.sub(blank, text)
    return text


_ABBREVIATIONS = re.compile(r"\b(?:e\.g|i\.e|vs|etc|cf|Fig|fig|approx|resp|No|no)\.$")


def _sentences(markdown: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the sentences of `markdown`."""
    spans: list[tuple[int, int]] = []
    # blocks: paragraphs, list items, headings, table rows, block quotes' lines that start items
    block_start = 0
    boundaries = [m.start() for m in re.finditer(r"\n(?=\s*\n|\s*(?:[-*+]|\d+\.)\s|\s*#|\s*\|)", markdown)]
    for end in [*boundaries, len(markdown)]:
        block = markdown[block_start:end]
        start = 0
        for m in re.finditer(r"[.!?](?=\s+[^\s\d])", block):
            if _ABBREVIATIONS.search(block[: m.end()]):
                continue
            spans.append((block_start + start, block_start + m.end()))
            start = m.end()
        spans.append((block_start + start, end))
        block_start = end
    return [(s, e) for s, e in spans if markdown[s:e].strip()]


def _quoted_sentences(markdown: str, spans: list[tuple[int, int]]) -> set[int]:
    """Indexes of the sentences the quoted tag covers."""
    covered: set[int] = set()
    for index, (start, end) in enumerate(spans):
        sentence = markdown[start:end]
        match = QUOTED_TAG.search(sentence)
        if not match:
            continue
        covered.add(index)
        if not sentence[: match.start()].strip(" \n\t>*_-") and index > 0:
            covered.add(index - 1)  # "... 10 µs. *(quoted: the book)*"
    return covered


def _preceding_words(text: str, position: int) -> str:
    return text[max(0, position - 24) : position].lower().rstrip()


def _qualifier(text: str, position: int) -> tuple[bool, str]:
    before = _preceding_words(text, position)
    if before.endswith(("between",)):
        return False, ""
    approximate = before.endswith(_APPROX)
    if before.endswith(_UPPER_BOUND):  # first: "never more than" is an upper bound
        return approximate, "upper"
    if before.endswith(_LOWER_BOUND):
        return approximate, "lower"
    return approximate, ""


def _split_numbers(nums: str) -> list[str]:
    """The numbers of a range or list ("19–37", "2, 12 and 6", "1,200 to 2,400")."""
    return re.findall(rf"(?<![\w.])(?:{_NUM})|\b(?:{_NUM_WORD})\b", nums, re.IGNORECASE)


def figures_in(text: str) -> list[tuple[int, Figure]]:
    """Every figure in `text` (already stripped of non-prose), with its offset."""
    found: list[tuple[int, Figure]] = []
    taken: list[tuple[int, int]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= s or start >= e for s, e in taken)

    for m in _MAGNITUDE.finditer(text):
        unit = m.group("unit")
        if m.group("verb"):
            if not re.fullmatch(r"\w+seconds|bytes", unit):
                continue  # "takes 5 ms" is a number; "costs microseconds" is a magnitude
            low, high = 1.0, 100.0  # "costs microseconds" reads as a few or tens of them
        else:
            low, high = _MAGNITUDES[m.group("mag").lower()]
        dimension, scales = ("time", (_TIME[unit],)) if unit in _TIME else ("size", _SIZE[unit])
        found.append((m.start(), Figure(m.group(0), low, dimension, scales, 0.0, "range", high)))
        taken.append(m.span())
    for m in _FIGURE.finditer(text):
        if not free(*m.span()):
            continue
        approximate, bound = _qualifier(text, m.start())
        prefix = _PREFIX.get(m.group("prefix") or m.group("rprefix") or "", 1.0)
        if m.group("rate"):
            dimension, scales = "rate", (prefix,)
        elif m.group("time"):
            dimension, scales = "time", (_TIME[m.group("time")],)
        elif m.group("size"):
            dimension, scales = "size", _SIZE[m.group("size")]
        elif m.group("pct"):
            dimension, scales = "pct", (1.0,)
        else:
            if m.group("ratio").strip() == "x" and m.group("space"):
                continue  # "3 x 4" is a product, not a ratio
            dimension, scales = "ratio", (1.0,)
        figure_text = " ".join(m.group(0).split())
        for part in _split_numbers(m.group("nums")):
            value = _to_float(part)
            found.append(
                (
                    m.start(),
                    Figure(
                        figure_text,
                        value,
                        dimension,
                        scales,
                        _rounding(part, approximate),
                        bound,
                        number=part,
                    ),
                )
            )
        taken.append(m.span())
    for m in _STAT.finditer(text):
        if not free(m.start("nums"), m.end("nums")):
            continue
        part = m.group("nums")
        found.append(
            (
                m.start(),
                Figure(" ".join(m.group(0).split()), _to_float(part), "stat", (1.0,), _rounding(part, False)),
            )
        )
        taken.append(m.span("nums"))
    for m in _COUNT.finditer(text):
        noun = m.group("noun").lower()
        if not free(m.start("nums"), m.end("nums")):
            continue
        if noun not in EVENT_NOUNS and not re.search(r"\d", m.group("nums")):
            continue  # "three layers": a number word counts only events
        if re.search(r"[.!?]", m.group("between") or ""):
            continue
        approximate, bound = _qualifier(text, m.start())
        for part in _split_numbers(m.group("nums")):
            word = _NUMBER_WORDS.get(part.lower())
            value = float(word) if word is not None else _to_float(part)
            tolerance = 0.0 if word is not None else _rounding(part, approximate)
            found.append(
                (
                    m.start(),
                    Figure(
                        " ".join(m.group(0).split()), value, "count", (1.0,), tolerance, bound, number=part
                    ),
                )
            )
        taken.append(m.span("nums"))
    for m in _LIST.finditer(text):
        if not free(*m.span("nums")):
            continue
        for part in _split_numbers(m.group("nums")):
            found.append((m.start(), Figure(m.group(0), _to_float(part), "count", (1.0,), 0.5, number=part)))
        taken.append(m.span("nums"))
    return sorted(found, key=lambda item: item[0])


# --- what the notebook shows -------------------------------------------------------------------


def output_texts(
    cell: nbformat.NotebookNode, *, strip_html: bool = True, with_errors: bool = False
) -> list[str]:
    """Every text a reader of the file sees in `cell`'s outputs: streams, plain/markdown/LaTeX
    results and HTML (its tags removed with `strip_html`, so figures in table cells read as text),
    and with `with_errors` the tracebacks too (the hygiene rule looks for paths there)."""
    texts: list[str] = []
    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "stream":
            texts.append(str(output.get("text", "")))
        elif kind in ("display_data", "execute_result"):
            data = output.get("data", {})
            texts.extend(str(data[m]) for m in ("text/plain", "text/markdown", "text/latex") if m in data)
            if "text/html" in data:
                markup = str(data["text/html"])
                texts.append(html.unescape(re.sub(r"<[^>]+>", " ", markup) if strip_html else markup))
        elif kind == "error" and with_errors:
            texts.append("\n".join(output.get("traceback", [])) + "\n" + str(output.get("evalue", "")))
    return texts


_OUTPUT_QUANTITY = re.compile(
    rf"(?<![\w.])(?P<num>{_NUM})(?P<prefix>[kKM](?=\s?[A-Za-z]*/s))?\s?(?:{_UNIT})?"
)


def _add_quantity(shown: _Shown, value: float, m: re.Match[str], bare: bool) -> None:
    """Record `value` under the unit `m` (a match with `_UNIT`'s groups) printed it with."""
    prefix = _PREFIX.get(m.group("prefix") or m.group("rprefix") or "", 1.0)
    if m.group("rate"):
        shown.by_dimension.setdefault("rate", []).append(value * prefix)
    elif m.group("time"):
        shown.by_dimension.setdefault("time", []).append(value * _TIME[m.group("time")])
    elif m.group("size"):
        for scale in _SIZE[m.group("size")]:
            shown.by_dimension.setdefault("size", []).append(value * scale)
    elif m.group("pct"):
        shown.by_dimension.setdefault("pct", []).append(value)
    elif m.group("ratio"):
        shown.by_dimension.setdefault("ratio", []).append(value)
    elif bare:
        shown.unitless.append(value)


def _shown(cells: list[nbformat.NotebookNode]) -> _Shown:
    shown = _Shown()
    for cell in cells:
        if cell.cell_type != "code":
            continue
        shown.code.extend(_code_numbers(cell.source))
        for text in output_texts(cell):
            # ranges and lists first ("runs 466 to 740 µs"): every number takes the unit at the end
            covered: list[tuple[int, int]] = []
            for m in _FIGURE.finditer(text):
                numbers = _split_numbers(m.group("nums"))
                if len(numbers) < 2:
                    continue
                covered.append(m.span())
                for number in numbers:
                    if number.lower() not in _NUMBER_WORDS:
                        shown.plain.append(_to_float(number))
                        _add_quantity(shown, _to_float(number), m, bare=False)
            for m in _OUTPUT_QUANTITY.finditer(text):
                if any(start <= m.start() < end for start, end in covered):
                    continue
                value = _to_float(m.group("num"))
                shown.plain.append(value)
                # bare: not "7 pods" (a count of something else)
                _add_quantity(shown, value, m, bare=not re.match(r" ?[A-Za-z]", text[m.end() :]))
    return shown


def _code_numbers(source: str) -> list[float]:
    """Every number in a code cell's text, literals and strings alike ("512Mi", "0.010")."""
    numbers = [_to_float(m.group(0)) for m in _NUMBER_IN_TEXT.finditer(source)]
    for base, exponent in re.findall(r"(\d+)\s*\*\*\s*(\d+)", source):
        if int(exponent) < 20:
            numbers.append(float(int(base) ** int(exponent)))
    return numbers


def _close(value: float, target: float, tolerance: float) -> bool:
    return abs(value - target) <= tolerance + 1e-9 * max(1.0, abs(target))


def _matches(figure: Figure, candidates: list[float], scale: float) -> bool:
    """Is one of `candidates` (in base units, divided by `scale` into the figure's unit) the figure?"""
    for raw in candidates:
        value = raw / scale
        if figure.bound == "range":
            if figure.value <= value < figure.upper:
                return True
        elif figure.bound == "lower":
            if figure.value - figure.tolerance <= value <= figure.value * 10:
                return True
        elif figure.bound == "upper":
            if figure.value / 10 <= value <= figure.value + figure.tolerance:
                return True
        elif _close(value, figure.value, figure.tolerance):
            return True
    return False


def is_shown(figure: Figure, shown: _Shown) -> bool:
    """Does the notebook show `figure` in an output, or set it in a code cell?"""
    if figure.dimension in ("count", "stat"):  # any number, whatever it was printed with
        return _matches(figure, shown.plain + shown.code, 1.0)
    # a figure with a unit: a number printed with a unit of its kind, or printed (or set) bare; "5 ms"
    # is not shown by "5 pods"
    unitless = shown.unitless + shown.code
    if figure.dimension == "pct":
        fraction = Figure(
            figure.text, figure.value / 100, "ratio", (1.0,), figure.tolerance / 100, figure.bound
        )
        return any(
            _matches(figure, values, 1.0) for values in (shown.by_dimension.get("pct", []), unitless)
        ) or (_matches(fraction, unitless, 1.0))
    for scale in figure.scales:
        if _matches(figure, shown.by_dimension.get(figure.dimension, []), scale):
            return True
        if figure.bound == "range":
            continue  # a magnitude in words is shown by a value with a unit only
        # a unitless number: in the figure's own unit (a table's header has the unit) or the base unit
        if _matches(figure, unitless, 1.0) or _matches(figure, unitless, scale):
            return True
    return False


def _neighbour_code_cells(cells: list[nbformat.NotebookNode], index: int) -> list[nbformat.NotebookNode]:
    """The last code cell before `index` and the first after it (those a paragraph describes)."""
    before = next((c for c in reversed(cells[:index]) if c.cell_type == "code"), None)
    after = next((c for c in cells[index + 1 :] if c.cell_type == "code"), None)
    return [c for c in (before, after) if c is not None]


# --- the check ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judged:
    """One figure of a markdown cell and what shows it: "output", "code", "quoted" or "" (nothing)."""

    cell: int
    figure: Figure
    sentence: str
    shown_by: str


def judge_prose(nb: nbformat.NotebookNode) -> list[Judged]:
    """Every figure of `nb`'s markdown cells with what shows it (the check's reasoning, for authors:
    `python -m minisched.notebooks prose --explain`)."""
    everywhere = _shown(nb.cells)
    outputs_only = _Shown(everywhere.by_dimension, everywhere.plain, everywhere.unitless, [])
    judged: list[Judged] = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        source = cell.source
        spans = _sentences(source)
        quoted = _quoted_sentences(source, spans)
        # words ("tens of µs") say what the cell beside them showed: any other output would do
        near = _shown(_neighbour_code_cells(nb.cells, index))
        for position, figure in figures_in(_strip_non_prose(source)):
            sentence_index = next((i for i, (s, e) in enumerate(spans) if s <= position < e), -1)
            start, end = spans[sentence_index] if sentence_index >= 0 else (position, position + 40)
            sentence = " ".join(source[start:end].split())
            if sentence_index in quoted:
                shown_by = "quoted"
            elif figure.bound == "range":
                shown_by = "output" if is_shown(figure, near) else ""
            elif is_shown(figure, outputs_only):
                shown_by = "output"
            else:
                shown_by = "code" if is_shown(figure, everywhere) else ""
            judged.append(Judged(index, figure, sentence, shown_by))
    return judged


def check_prose(nb: nbformat.NotebookNode) -> list[ProseProblem]:
    """Every figure of `nb`'s markdown cells that the notebook does not show and is not quoted."""
    problems: list[ProseProblem] = []
    reported: set[tuple[int, str, str]] = set()
    for judged in judge_prose(nb):
        figure = judged.figure
        if judged.shown_by:
            continue
        if figure.bound == "range":
            why = (
                f"no output of the code cells just before and after shows a value from "
                f"{figure.value:g} to {figure.upper:g} in that unit"
            )
        elif (
            len(re.findall(_NUM, figure.text)) + len(re.findall(rf"\b(?:{_NUM_WORD})\b", figure.text, re.I))
            > 1
        ):
            why = f"its {figure.number}: no output shows it and no code cell sets it"
        else:
            why = "no output shows it and no code cell sets it"
        key = (judged.cell, judged.sentence, f"{figure.text}|{figure.value}")
        if key in reported:
            continue
        reported.add(key)
        problems.append(ProseProblem(judged.cell, figure.text, judged.sentence, why))
    return problems


def check_prose_file(path: str | Path) -> list[ProseProblem]:
    return check_prose(nbformat.read(Path(path), as_version=4))
