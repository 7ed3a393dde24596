"""The calculator tools, exactly as the hidden eval serves them (names, parameters, descriptions, results).

verifiers starts this module as its own process (``python -m calc_chain_train.tools``) and serves the
``@vf.tool`` methods over MCP. The schema the model sees is built from the type hints, so each parameter
carries the eval's description through ``Annotated[..., Field(description=...)]``. Results are strings,
as in the eval; a rejected request returns ``error: ...`` as the result text instead of failing the call.
"""

# No `from __future__ import annotations` here: the tool server builds each tool's schema from its annotations at
# run time, and string annotations it cannot resolve (Literal, Annotated) would break it.
from typing import Annotated

import verifiers.v1 as vf
from pydantic import Field

__all__ = ["CalcTools"]


class CalcTools(vf.Toolset[vf.SharedToolsetConfig]):
    TOOL_PREFIX = None  # bare tool names (add, not calc_tools_add), as in the eval

    @vf.tool
    def add(
        self,
        a: Annotated[int, Field(description="the first number")],
        b: Annotated[int, Field(description="the number to add")],
    ) -> str:
        """Add two integers and return the sum."""
        return str(a + b)

    @vf.tool
    def sub(
        self,
        a: Annotated[int, Field(description="the number to subtract from")],
        b: Annotated[int, Field(description="the number to subtract")],
    ) -> str:
        """Subtract b from a and return the difference."""
        return str(a - b)

    @vf.tool
    def mul(
        self,
        a: Annotated[int, Field(description="the first number")],
        b: Annotated[int, Field(description="the number to multiply by")],
    ) -> str:
        """Multiply two integers and return the product."""
        return str(a * b)

    @vf.tool
    def div(
        self,
        a: Annotated[int, Field(description="the number to divide")],
        b: Annotated[int, Field(description="the number to divide by")],
    ) -> str:
        """Divide a by b and return the quotient (exact when b divides a)."""
        if b == 0:
            return "error: division by zero"
        return str(a // b) if a % b == 0 else f"{a / b:.6g}"


if __name__ == "__main__":
    CalcTools.run()
