"""Model-call sites: a model call's request template, compiled like a task.

A *site* is one place in an agent that calls a model: the request with its varying parts cut
out as *slots*. Sites are found by aligning the recorded requests of one call site (same model,
same output-affecting parameters, same message structure, same fixed text); the slots are the
site's typed input (a JSON object of strings), the response (content, or tool calls) its answer.
A site's id (``site:<16 hex>``) names it in the store like a task name: ``auto compile --site ID``
compiles it through the same ladder, its generations and ratchet log are keyed by it, and the
census reports it with its slots.

Public API::

    discover(spans) -> Discovery              # sites, their requests, each request's slot values
    store_sites(store, task=None) -> {id: Site}          # a store's sites, from its distinct requests
    census_view(spans) -> (spans, sites)      # model calls re-keyed to sites (the census's view)
    read_site(store, site_id) -> SiteWitnesses | None   # a site and its witnesses
    Site.extract(body) -> dict | None ; Site.render(slots) -> body ; Site.to_manifest() / from_manifest()
    site_answer(output) ; answer_choices(answer)        # recorded response <-> site answer
    is_site_id(name) ; SITE_PREFIX

Modules: :mod:`~auto.sites.align` (leaf templates), :mod:`~auto.sites.site` (the Site),
:mod:`~auto.sites.answer` (answers), :mod:`~auto.sites.discover` (grouping and witnesses).
"""

from auto.sites.answer import answer_choices, site_answer
from auto.sites.discover import (Discovery, SiteWitnesses, census_view, discover, is_model_call, read_site,
                                 store_sites)
from auto.sites.site import MANIFEST_FORMAT, SITE_PREFIX, Site, Slot, is_site_id

__all__ = ["Discovery", "MANIFEST_FORMAT", "SITE_PREFIX", "Site", "SiteWitnesses", "Slot", "answer_choices",
           "census_view", "discover", "is_model_call", "is_site_id", "read_site", "site_answer", "store_sites"]
