"""The tools the model uses in training. SKELETON: replace the placeholder with the eval tool interface.

The hidden eval gives the model the tools listed in INSTRUCTIONS.md (JSON schemas in task_spec.json ``tools``).
Serve exactly those here, one ``@vf.tool`` method each:
- the method name is the tool name (``TOOL_PREFIX = None`` keeps it bare, as in the eval);
- the parameters have the same names and types (int -> integer, str -> string, Literal["a", "b"] -> enum),
  each described with ``Annotated[type, Field(description="...")]`` as in the schema;
- the docstring's text is the tool description;
- return the same result strings the eval's tools return (see the dev examples' ``solution`` steps), and
  return ``"error: ..."`` text for a rejected request instead of raising.

The task's own data is ``self.state`` (a ``WorldState``, filled by ``TrainTask.setup``): one server serves
every rollout, and ``self.state`` is always the calling rollout's state. Pure tools (arithmetic, string
functions) can ignore it.
"""

# No `from __future__ import annotations` here: the tool server builds each tool's schema from its annotations at
# run time, and string annotations it cannot resolve (Literal, Annotated) would break it.
from typing import Annotated

import verifiers.v1 as vf
from pydantic import Field

from . import WorldState

__all__ = ["TrainTools"]


class TrainTools(vf.Toolset[vf.SharedToolsetConfig, WorldState]):
    TOOL_PREFIX = None  # the model sees `example_tool`, not `train_tools_example_tool`

    @vf.tool
    def example_tool(self, text: Annotated[str, Field(description="an example parameter")]) -> str:
        """PLACEHOLDER: not an eval tool. Replace it with the eval's tools."""
        return f"error: example_tool is a placeholder (got {text!r})"


# Required: verifiers starts the tool server with `python -m $module.tools`.
if __name__ == "__main__":
    TrainTools.run()
