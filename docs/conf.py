"""Sphinx configuration of the documentation site: `make docs` builds it into build/docs."""

import os
import re

# autodoc imports the package: pick the torch handler before it does (a MindSpore job would pick
# the MindSpore one; the API is the same).
os.environ["HYPER_PARALLEL_PLATFORM"] = "torch"

project = "HyperParallel Symmetric Memory"
author = "HyperParallel Symmetric Memory authors"
copyright = "the HyperParallel Symmetric Memory authors"

extensions = ["myst_parser", "sphinx.ext.autodoc"]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# Headings of every level get anchors, so pages can link to `page.md#section` as on a code host.
myst_heading_anchors = 3

autodoc_member_order = "bysource"
# The signatures keep the API's own names for its argument kinds (the package annotates lazily, so
# autodoc sees the names rather than what they stand for); python-api.md says what each one accepts.
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_type_aliases = {name: name for name in ("Tensor", "Dtype", "IntArg", "SignalOpArg", "CompareOpArg")}

html_theme = "alabaster"
html_title = project
html_static_path = []


def _alias_names(app, what, name, obj, options, signature, return_annotation):
    """Sphinx 9 prints an alias nested in Optional/Sequence as TypeAliasForwardRef('Tensor'): keep the name."""

    def fix(text):
        return re.sub(r"TypeAliasForwardRef\('(\w+)'\)", r"\1", text) if text else text

    return fix(signature), fix(return_annotation)


def setup(app):
    app.connect("autodoc-process-signature", _alias_names)
