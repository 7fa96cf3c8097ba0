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
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
# The C string quoting behind json.dumps (with a pure-Python fallback).
from json.encoder import encode_basestring_ascii as quote

from placement_lite.candidates import summaries

# Formats (uuid quoting, summaries per microversion and classes) kept.
FORMATS_KEPT = 16


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
            found = self._formats.get(key)
            if found is None:
                found = self._formats[key] = {}
                if len(self._formats) > self.bound:
                    self._formats.popitem(last=False)
            else:
                self._formats.move_to_end(key)
            return found

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


def requests_list(result) -> str:
    """Before DICT_ALLOCATIONS: a list of {resource_provider: {uuid}, resources}."""
    names = result.class_names
    uuids = result.uuids
    return json.dumps([{"allocations": [
        {"resource_provider": {"uuid": uuids[rp]},
         "resources": {names[rc]: n for rc, n in res.items()}}
        for rp, res in cand.allocations.items()]}
        for cand in result.candidates], separators=(",", ":"))


# The response is written as JSON text directly: on full answers building
# a dict per candidate and encoding it was a third of the response time.
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


def _request_texts(result, with_mappings, texts: "ProviderTexts") -> list:
    """Each candidate's text, in order."""
    names = result.class_names
    uuids = result.uuids
    # Quoted once per provider: per copy of the facts when there is one
    # (a uuid never changes), else per request, and only those named.
    quoted = (texts.of(result.memory.snap, "quoted uuid")
              if result.memory is not None else {})
    templates: dict = {}
    out = []
    for cand in result.candidates:
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


def requests_dict(result, with_mappings, texts: "ProviderTexts") -> str:
    return "[%s]" % ",".join(_request_texts(result, with_mappings, texts))


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


def summaries_text(sums, with_traits, with_tree) -> str:
    names: dict = {}
    return "{%s}" % ",".join(
        _summary_text(s.uuid, [(n, c, str(u)) for n, c, u in s.resources],
                      s.traits, s.parent_uuid, s.root_uuid, with_traits,
                      with_tree, names)
        for s in sums)


def memory_summaries(result, whole_trees, classes, with_traits, with_tree,
                     texts: "ProviderTexts") -> str:
    return "{%s}" % ",".join(_memory_summary_texts(
        result, summaries.provider_ids(result, whole_trees), classes,
        with_traits, with_tree, texts))


def _memory_summary_texts(result, ids, classes, with_traits, with_tree,
                          texts: "ProviderTexts") -> list:
    """The summaries of providers `ids` from the process's copy of the
    facts. A provider's text but for its usage is the same on every
    request while the copy lasts, so it is made once per copy, as a
    %-template, and filled in with the `used` a request read. The text
    last filled in is kept beside its template with the usage it shows:
    between two requests most providers' usage has not changed, and the
    kept text is then used as it is."""
    snap = result.memory.snap
    key = ("summary", with_traits, with_tree,
           None if classes is None else frozenset(classes))
    # pid -> (template, its `used` keys, the usage shown, the text shown)
    templates = texts.of(snap, key)
    known = templates.get
    used = result.memory.used.get
    out = []
    for pid in ids:
        found = known(pid)
        if found is None:
            found = (*_template_of(snap, pid, classes, with_traits, with_tree),
                     None, None)
        text, keys, shown_usage, shown = found
        # None where nothing is used (no row read): compared as it is,
        # shown as 0.
        usage = tuple(map(used, keys))
        if usage != shown_usage:
            shown = text % tuple([n or 0 for n in usage]) if keys else text
            templates[pid] = (text, keys, usage, shown)
        out.append(shown)
    return out


def tree_parts(result, with_mappings, whole_trees, classes, with_traits,
               with_tree, texts: "ProviderTexts") -> dict:
    """root id -> (its candidates' text, its providers' summaries' text),
    for engine.tree_parts."""
    roots = result.roots
    requests: dict = {}
    for cand, text in zip(result.candidates, _request_texts(result, with_mappings, texts)):
        requests.setdefault(roots[cand.providers[0]], []).append(text)
    ids = summaries.provider_ids(result, whole_trees)
    summarized: dict = {}
    root = result.memory.snap.root
    for pid, text in zip(ids, _memory_summary_texts(result, ids, classes,
                                                    with_traits, with_tree, texts)):
        summarized.setdefault(root[pid], []).append(text)
    return {tree: (tuple(texts), ",".join(summarized[tree]))
            for tree, texts in requests.items()}


def _template_of(snap, pid, classes, with_traits, with_tree) -> tuple:
    names = snap.class_names
    rows = [(rc, row) for rc, row in sorted(snap.inventory[pid].items())
            if classes is None or names[rc] in classes]
    parent = snap.parent[pid]
    text = _summary_text(
        snap.uuid[pid], [(names[rc], int(row.capacity), "%d") for rc, row in rows],
        [snap.trait_names[i].replace("%", "%%") for i in sorted(snap.traits[pid])]
        if with_traits else None,
        snap.uuid[parent] if parent is not None else None, snap.uuid[snap.root[pid]],
        with_traits, with_tree, {})
    if not rows:
        # No placeholder: the text is used as it is, so no %% either.
        text = text.replace("%%", "%")
    # The (provider, class) keys of its `used`, in placeholder order.
    return text, tuple((pid, rc) for rc, _row in rows)
