"""Verifiers v1 environment packages for the families: the hidden eval of each, and its tools.

``build_eval_package("calc_chain", out_dir)`` writes an installable project ``out_dir/ait-eval-calc-chain``
whose module exports one ``vf.Taskset`` (the 200 hidden tasks, bundled), a shared ``vf.Toolset`` with the
family's tools under their own names, and a reward that is the family's scorer. The package vendors the
family source, so a pod needs only ``verifiers`` and ``msgspec`` (see ``_pkg_runtime`` for how per-task
tool state works with one shared tool server). ``toolset_files`` gives the same toolset for another
package, e.g. an agent-facing template env. ``pack_eval_package`` gives the package as a tar, which the
engine sends a pod once that pod's training has ended.

Importing this package does not import verifiers; the generated packages do.
"""

from __future__ import annotations

from ._build import EvalPackage, build_eval_package, package_files, package_names, toolset_files
from ._ship import pack_eval_package
from ._vendor import THIRD_PARTY, VendorError, vendor_family

__all__ = [
    "THIRD_PARTY",
    "EvalPackage",
    "VendorError",
    "build_eval_package",
    "pack_eval_package",
    "package_files",
    "package_names",
    "toolset_files",
    "vendor_family",
]
