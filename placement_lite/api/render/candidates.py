"""The JSON text of GET /allocation_candidates answers.

The response is written as JSON text directly: on full answers building
a dict per candidate and encoding it was a third of the response time.
Every candidate of one engine.Layout has the same text but for its
providers' uuids, so each layout becomes a %-template once per request,
and each uuid is quoted once.

Over the process's copy of the facts, what a provider's text is but for
its usage does not change while the copy lasts, so it is kept
(ProviderTexts): the API's own cache of rendered text, known by the
copy's serial and the answer's format.

An answer too big to hold (candidates/flow.py) is written in pieces as
its candidates are found (`pieces`), with the same text.
"""
from __future__ import annotations

import json
import operator
import threading
import weakref
from collections import OrderedDict
from itertools import islice
from typing import Iterator, NamedTuple, Optional
# The C string quoting behind json.dumps (with a pure-Python fallback).
from json.encoder import encode_basestring_ascii as quote

from placement_lite.candidates.by_tree import Parts
from placement_lite.candidates.kept import lru_entry

# Formats (uuid quoting, summaries per microversion and classes) kept.
FORMATS_KEPT = 16
# Candidates (or summaries) per piece of an answer written as it is found:
# tens to a few hundred KB, which the server sends on before the next.
PIECE = 256


class ProviderTexts:
    """Per answer format, text made of one provider's facts (its quoted
    uuid, its summary's template), for the newest copy of the facts.

    One owner (the candidates resource), one bound (FORMATS_KEPT formats,
    least recently used let go), one lock for the index of formats. A
    format's dict is only added to or overwritten key by key by requests;
    when a refreshed copy comes, each is copied whole (one C-level copy,
    which no other thread's store can interleave with) less the providers
    the refresh touched. A request on an older copy gets a dict of its
    own.
    """

    def __init__(self, bound: int = FORMATS_KEPT):
        self.bound = bound
        self._lock = threading.Lock()
        self._formats: OrderedDict = OrderedDict()
        self._serial = None

    def of(self, snap, key) -> dict:
        """provider id -> text, of format `key`, for copy `snap`."""
        with self._lock:
            if snap.serial != self._serial:
                if self._serial is not None and snap.serial < self._serial:
                    return {}
                self._advance(snap)
            return lru_entry(self._formats, key, dict, self.bound)

    def _advance(self, snap) -> None:
        carried: OrderedDict = OrderedDict()
        if snap.since is not None and snap.since == self._serial:
            gone = snap.affected
            for key, texts in self._formats.items():
                texts = texts.copy()
                for rp in gone:
                    texts.pop(rp, None)
                carried[key] = texts
        self._formats = carried
        self._serial = snap.serial


class Format(NamedTuple):
    """How an answer is shown, by microversion."""
    dict_allocations: bool  # allocations keyed by provider (1.12)
    mappings: bool  # each group's providers (1.34)
    classes: Optional[frozenset]  # classes summaries show (None: all)
    traits: bool  # summaries show traits (1.17)
    tree: bool  # summaries show parent and root (1.29)


class PartTexts:
    """Each tree's part of an answer as text, per format, for as long as
    the engine keeps the part (by_tree.TreePart, never changed). A
    format's table is keyed by the part's token (unique in the process)
    and its entry goes the moment the engine lets the part go (a weak
    reference's callback): bounded by what the engine keeps. Requests
    only add and read entries (one dict operation each); nothing
    iterates a table."""

    def __init__(self):
        self._formats: dict = {}  # Format -> {token: _PartText}

    def table(self, fmt: "Format") -> dict:
        found = self._formats.get(fmt)
        if found is None:
            found = self._formats.setdefault(fmt, {})
        return found

    @staticmethod
    def put(table: dict, part, text: "_PartText") -> "_PartText":
        token = part.token
        # Held by the entry, so the callback lives as long as it does.
        ref = weakref.ref(part, lambda _ref: table.pop(token, None))
        table[token] = text._replace(ref=ref)
        return text


class _PartText(NamedTuple):
    """A part's text in one format."""
    requests: str  # its candidates' texts, joined
    each: tuple  # each candidate's text (for a bound within the part)
    summaries: str  # its providers' summaries, joined
    ref: object = None  # a weak reference to the part, with the callback


_TOKEN = operator.attrgetter("token")
_REQUESTS = operator.attrgetter("requests")
_SUMMARIES = operator.attrgetter("summaries")


def body(answer, fmt: Format, texts: ProviderTexts, parts: PartTexts) -> bytes:
    """The whole JSON document of an answer (by_tree.Parts or an
    engine.Result as answer.answer filled it)."""
    if isinstance(answer, Parts):
        reqs, sums = _parts_texts(answer, fmt, texts, parts)
    else:
        if not fmt.dict_allocations:
            reqs = "[%s]" % _requests_list(answer.candidates, answer.class_names,
                                           answer.uuids)
        else:
            quoted = texts.of(answer.snapshot, "quoted uuid") if answer.snapshot else {}
            reqs = "[%s]" % ",".join(_request_texts(
                answer.candidates, answer.class_names, answer.uuids, quoted, fmt.mappings))
        if answer.snapshot is not None:
            sums = "{%s}" % ",".join(_summary_texts(
                answer.snapshot, answer.shown, answer.used.get, fmt, texts))
        else:
            sums = _summaries_text(answer.summaries, fmt)
    return ('{"allocation_requests":%s,"provider_summaries":%s}' % (reqs, sums)).encode()


def _parts_texts(answer: Parts, fmt: Format, texts: ProviderTexts,
                 parts: PartTexts) -> tuple:
    """The answer's two texts, made of its parts' (a thousand parts are
    looked up and joined without a Python loop over them)."""
    if not answer.parts:
        return "[]", "{}"
    table = parts.table(fmt)
    found = list(map(table.get, map(_TOKEN, answer.parts)))
    if None in found:
        snap = answer.snapshot
        quoted = texts.of(snap, "quoted uuid")
        for i, part in enumerate(answer.parts):
            if found[i] is None:
                each = tuple(_request_texts(part.candidates, answer.class_names,
                                            snap.uuid, quoted, fmt.mappings))
                found[i] = parts.put(table, part, _PartText(
                    ",".join(each), each, ",".join(_summary_texts(
                        snap, part.summary_ids, part.used().get, fmt, texts))))
    if answer.last is not None:
        # The bound falls within the last part's candidates.
        last = found[-1]
        found[-1] = last._replace(requests=",".join(last.each[:answer.last]))
    return ("[%s]" % ",".join(map(_REQUESTS, found)),
            "{%s}" % ",".join(map(_SUMMARIES, found)))


def pieces(flow, fmt: Format, texts: ProviderTexts) -> Iterator[bytes]:
    """The JSON document of a candidates/flow.Flow, in pieces of PIECE
    candidates (then summaries) as the search finds them: the very text
    body() makes of the same answer, never held whole."""
    yield b'{"allocation_requests":['
    names, uuids = flow.class_names, flow.uuids
    if fmt.dict_allocations:
        quoted = texts.of(flow.snapshot, "quoted uuid") if flow.snapshot else {}
        templates: dict = {}

        def text(batch):
            return ",".join(_request_texts(batch, names, uuids, quoted, fmt.mappings,
                                           templates))
    else:
        def text(batch):
            return _requests_list(batch, names, uuids)
    lead = ""
    for batch in _batches(flow.candidates(), PIECE):
        yield (lead + text(batch)).encode()
        lead = ","
    flow.finish()
    yield b'],"provider_summaries":{'
    lead = ""
    if flow.snapshot is not None:
        used = flow.used.get
        for ids in _batches(flow.shown, PIECE):
            yield (lead + ",".join(_summary_texts(flow.snapshot, ids, used, fmt,
                                                  texts))).encode()
            lead = ","
    else:
        quoted_names: dict = {}
        for sums in _batches(flow.summaries, PIECE):
            yield (lead + _summaries_joined(sums, fmt, quoted_names)).encode()
            lead = ","
    yield b"}}"


def _batches(items, size: int) -> Iterator[list]:
    rest = iter(items)
    while True:
        batch = list(islice(rest, size))
        if not batch:
            return
        yield batch


def _requests_list(candidates, names: dict, uuids) -> str:
    """Before 1.12: each candidate as {allocations: [{resource_provider:
    {uuid}, resources}]}, joined (the list's brackets left to the caller)."""
    return json.dumps([{"allocations": [
        {"resource_provider": {"uuid": uuids[rp]},
         "resources": {names[rc]: n for rc, n in res.items()}}
        for rp, res in cand.allocations.items()]}
        for cand in candidates], separators=(",", ":"))[1:-1]


# Every candidate of one engine.Layout has the same text but for its
# providers' uuids, so each layout becomes a %-template once per request,
# and each uuid is quoted once.

def _template(layout, names, with_mappings) -> tuple:
    """(template, provider positions in placeholder order)."""
    order = []
    allocs = []
    for pos, res in layout.allocations:
        order.append(pos)
        amounts = ",".join("%s:%d" % (quote(names[rc]), n) for rc, n in res.items())
        allocs.append('%%s:{"resources":{%s}}' % amounts.replace("%", "%%"))
    text = '{"allocations":{%s}' % ",".join(allocs)
    if with_mappings:
        maps = []
        for suffix, positions in layout.mappings:
            order.extend(positions)
            maps.append("%s:[%s]" % (quote(suffix).replace("%", "%%"),
                                     ",".join(["%s"] * len(positions))))
        text += ',"mappings":{%s}' % ",".join(maps)
    return text + "}", tuple(order)


def _request_texts(candidates, names: dict, uuids, quoted: dict,
                   with_mappings: bool, templates: Optional[dict] = None) -> list:
    """Each candidate's text, in order. `quoted`: provider id -> its
    quoted uuid, filled as met (kept per copy of the facts when there is
    one: a uuid never changes); `templates`: layout -> its template, for
    an answer rendered in pieces."""
    if templates is None:
        templates = {}
    out = []
    for cand in candidates:
        found = templates.get(cand.layout)
        if found is None:
            found = templates[cand.layout] = _template(
                cand.layout, names, with_mappings)
        text, order = found
        rps = cand.providers
        try:
            out.append(text % tuple([quoted[rps[pos]] for pos in order]))
        except KeyError:
            for rp in rps:
                if rp not in quoted:
                    quoted[rp] = quote(uuids[rp])
            out.append(text % tuple([quoted[rps[pos]] for pos in order]))
    return out


def _summary_text(uuid, resources, traits, parent_uuid, root_uuid, with_traits,
                  with_tree, names: dict) -> str:
    """One provider's summary; resources are (class name, capacity, used
    as text). `names` memoises quoted class names."""
    parts = []
    for name, capacity, used in resources:
        q = names.get(name)
        if q is None:
            q = names[name] = quote(name)
        parts.append('%s:{"capacity":%d,"used":%s}' % (q, capacity, used))
    text = '%s:{"resources":{%s}' % (quote(uuid), ",".join(parts))
    if with_traits:
        text += ',"traits":[%s]' % ",".join(map(quote, traits))
    if with_tree:
        text += ',"parent_provider_uuid":%s,"root_provider_uuid":%s' % (
            quote(parent_uuid) if parent_uuid is not None else "null",
            quote(root_uuid))
    return text + "}"


def _summaries_text(sums, fmt: Format) -> str:
    return "{%s}" % _summaries_joined(sums, fmt, {})


def _summaries_joined(sums, fmt: Format, names: dict) -> str:
    """Summary values' texts, joined; `names` memoises quoted class names."""
    return ",".join(
        _summary_text(s.uuid, [(n, c, str(u)) for n, c, u in s.resources],
                      s.traits, s.parent_uuid, s.root_uuid, fmt.traits,
                      fmt.tree, names)
        for s in sums)


class _Shown(NamedTuple):
    """A provider's summary as last shown: its template, the (provider,
    class) keys of the `used` it shows, that usage, and the text."""
    template: str
    keys: tuple
    usage: Optional[tuple]
    text: Optional[str]


def _summary_texts(snap, ids, used, fmt: Format, texts: ProviderTexts) -> list:
    """The summaries of providers `ids` from the process's copy of the
    facts, `used` giving each (provider, class)'s usage (None: 0). A
    provider's text but for its usage is the same on every request while
    the copy lasts, so it is made once per copy, as a %-template, and
    filled in with the usage. The text last filled in is kept beside its
    template with the usage it shows: between two requests most
    providers' usage has not changed, and the kept text is then used as
    it is."""
    templates = texts.of(snap, ("summary", fmt.traits, fmt.tree, fmt.classes))
    known = templates.get
    out = []
    for pid in ids:
        found = known(pid)
        if found is None:
            found = _Shown(*_template_of(snap, pid, fmt), None, None)
        usage = tuple(map(used, found.keys))
        if usage != found.usage:
            text = (found.template % tuple([n or 0 for n in usage])
                    if found.keys else found.template)
            found = templates[pid] = _Shown(found.template, found.keys, usage, text)
        out.append(found.text)
    return out


def _template_of(snap, pid, fmt: Format) -> tuple:
    names = snap.class_names
    classes = fmt.classes
    rows = [(rc, row) for rc, row in sorted(snap.inventory[pid].items())
            if classes is None or names[rc] in classes]
    parent = snap.parent[pid]
    text = _summary_text(
        snap.uuid[pid], [(names[rc], int(row.capacity), "%d") for rc, row in rows],
        [snap.trait_names[i].replace("%", "%%") for i in sorted(snap.traits[pid])]
        if fmt.traits else None,
        snap.uuid[parent] if parent is not None else None, snap.uuid[snap.root[pid]],
        fmt.traits, fmt.tree, {})
    if not rows:
        # No placeholder: the text is used as it is, so no %% either.
        text = text.replace("%%", "%")
    # The (provider, class) keys of its `used`, in placeholder order.
    return text, tuple((pid, rc) for rc, _row in rows)
