"""GET /allocation_candidates: parse, search, render for the microversion."""
from __future__ import annotations

import json
import time
from functools import lru_cache
# The C string quoting behind json.dumps (with a pure-Python fallback).
from json.encoder import encode_basestring_ascii as quote

import falcon

from placement_lite.api import render, request
from placement_lite.api.microversion import versioned
from placement_lite.api.provider_filters import query_dialect
from placement_lite.api.schemas import allocation_candidates as schema
from placement_lite.api.versions import (
    ALL_RESOURCES_IN_SUMMARIES, ALLOCATION_CANDIDATES, CANDIDATE_REQUIRED,
    DICT_ALLOCATIONS, MAPPINGS, NESTED_CANDIDATES)
from placement_lite.candidates import engine, summaries
from placement_lite.candidates.query import parse_candidate_request


def _requests_list(result):
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


def _request_texts(result, with_mappings) -> list:
    """Each candidate's text, in order."""
    names = result.class_names
    uuids = result.uuids
    # Quoted once per provider: per copy of the facts when there is one
    # (a uuid never changes), else per request, and only those named.
    quoted = (result.memory.snap.memo.setdefault("quoted uuid", {})
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


def _requests_dict(result, with_mappings) -> str:
    return "[%s]" % ",".join(_request_texts(result, with_mappings))


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


def _summaries(sums, with_traits, with_tree) -> str:
    names: dict = {}
    return "{%s}" % ",".join(
        _summary_text(s.uuid, [(n, c, str(u)) for n, c, u in s.resources],
                      s.traits, s.parent_uuid, s.root_uuid, with_traits,
                      with_tree, names)
        for s in sums)


def _memory_summaries(result, whole_trees, classes, with_traits, with_tree) -> str:
    return "{%s}" % ",".join(_memory_summary_texts(
        result, summaries.provider_ids(result, whole_trees), classes,
        with_traits, with_tree))


def _memory_summary_texts(result, ids, classes, with_traits, with_tree) -> list:
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
    templates = snap.memo.setdefault(key, {})
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


def _tree_parts(result, with_mappings, whole_trees, classes, with_traits,
                with_tree) -> dict:
    """root id -> (its candidates' text, its providers' summaries' text),
    for engine.tree_parts."""
    roots = result.roots
    requests: dict = {}
    for cand, text in zip(result.candidates, _request_texts(result, with_mappings)):
        requests.setdefault(roots[cand.providers[0]], []).append(text)
    ids = summaries.provider_ids(result, whole_trees)
    summarized: dict = {}
    root = result.memory.snap.root
    for pid, text in zip(ids, _memory_summary_texts(result, ids, classes,
                                                    with_traits, with_tree)):
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


@lru_cache(maxsize=512)
def _wanted(query_string: str, version):
    """The query string validated and parsed at `version` (a pure function
    of the two, so remembered: schedulers ask the same few flavors over
    and over, and checking one costs about as much as answering it with a
    small `limit`). A refused query raises, and is not remembered."""
    params = {name: value if isinstance(value, list) else [value]
              for name, value in falcon.uri.parse_query_string(
                  query_string, keep_blank=True, csv=False).items()}
    request.validate(params, schema.QUERY.at(version), what="Query string")
    return parse_candidate_request(params, query_dialect(version))


class AllocationCandidates:
    policies = {"GET": "placement:allocation_candidates:list"}

    def __init__(self, services):
        self.services = services

    @versioned(ALLOCATION_CANDIDATES)
    def on_get(self, req, resp):
        version = req.context.microversion
        wanted = _wanted(req.query_string, version)
        with_traits = version.has(CANDIDATE_REQUIRED)
        with_tree = version.has(NESTED_CANDIDATES)
        settings = self.services.settings
        started = time.perf_counter()
        classes = None if version.has(ALL_RESOURCES_IN_SUMMARIES) \
            else wanted.resource_class_names()
        with self.services.db.read() as conn:
            snapshot = self.services.facts_now(conn)
            parts = None
            randomize = settings.randomize_allocation_candidates
            if (snapshot is not None and version.has(DICT_ALLOCATIONS)
                    and not (randomize and wanted.limit)):
                with_mappings = version.has(MAPPINGS)
                parts = engine.tree_parts(
                    conn, wanted, snapshot, (req.query_string, version),
                    lambda result: _tree_parts(result, with_mappings, wanted.nested_aware,
                                               classes, with_traits, with_tree),
                    engine.bound_of(wanted, settings.max_allocation_candidates,
                                    randomize))
            if parts is None:
                result = engine.find(conn, wanted, settings.max_allocation_candidates,
                                     randomize, snapshot=snapshot)
                if result.memory is not None:
                    sums = _memory_summaries(result, wanted.nested_aware, classes,
                                             with_traits, with_tree)
                else:
                    sums = _summaries(summaries.summarize(
                        conn, result, wanted.nested_aware, classes,
                        with_traits=with_traits, with_tree=with_tree),
                        with_traits, with_tree)
        metrics = self.services.metrics
        if metrics is not None:
            metrics.observe_candidate_search(time.perf_counter() - started)
        if parts is not None:
            reqs = "[%s]" % ",".join([text for p in parts for text in p[0]])
            sums = "{%s}" % ",".join([p[1] for p in parts])
        elif version.has(DICT_ALLOCATIONS):
            reqs = _requests_dict(result, version.has(MAPPINGS))
        else:
            reqs = _requests_list(result)
        resp.content_type = falcon.MEDIA_JSON
        resp.data = ('{"allocation_requests":%s,"provider_summaries":%s}' % (
            reqs, sums)).encode()
        render.cache_headers(req, resp)
