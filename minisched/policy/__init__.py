"""§3.2: a small policy language for node selection, parsed by hand (never `eval`ed).

    policy = compile_policy('and(hasLabel("gpu", "true"), not(hasLabel("env", "staging")))')
    policy.evaluate(node, pod)   # -> bool

Modules, one concept each: tokens and lexer (text -> tokens), ast, parser (tokens -> AST with
positions), checker (types), functions (the registry of callable names), evaluator, printer
(AST -> canonical text), errors (with a caret under the offending column), compiled (Policy).
"""

from minisched.policy.compiled import Policy, compile_policy
from minisched.policy.errors import PolicyError, PolicySyntaxError, PolicyTypeError
from minisched.policy.functions import (
    FUNCTIONS,
    Function,
    Param,
    PolicyContext,
    Type,
    describe_functions,
    register,
)
from minisched.policy.parser import parse
from minisched.policy.printer import to_text

__all__ = [
    "FUNCTIONS",
    "Function",
    "Param",
    "Policy",
    "PolicyContext",
    "PolicyError",
    "PolicySyntaxError",
    "PolicyTypeError",
    "Type",
    "compile_policy",
    "describe_functions",
    "parse",
    "register",
    "to_text",
]
