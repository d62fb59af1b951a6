"""The names a piece of POSIX shell uses, as shellcheck's whole-script checks see them: the
variables it assigns and reads, the functions it defines, calls (with arguments or without)
and which of them always exit, each function's own. What a part of a script shares with the
rest of it is nothing else (parts.py).

A small scanner, not a full parser: it follows quoting, here-documents, comments, command
and arithmetic substitution and parameter expansion, which decide whether a `$NAME` or a
`NAME=` is one; and the command position and compound commands, which decide whether a word
is a call or an assignment, and which command a function ends with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_POSITIONAL = "123456789@*#"
_SPECIAL = "?!-$0"
# Words that open or close a compound command, or keep the next word in command position.
_OPENERS = {"if": "fi", "case": "esac", "while": "done", "until": "done", "for": "done",
            "{": "}"}
_KEEP_POSITION = {"then", "else", "elif", "do", "!", "time"}
# Commands whose arguments assign the names they are given.
_ASSIGNING = {"read": 0, "export": 0, "readonly": 0, "local": 0, "getopts": 1}
_OPERATORS = ("&&", "||", ";;", ";", "&", "|", "(", ")")
_REDIRECTIONS = ("<<-", "<<", ">>", ">&", "<&", ">|", "<>", ">", "<")


@dataclass(slots=True)
class Body:
    """What one function (or the top level) does with names, in the order first met."""

    assigned: dict[str, None] = field(default_factory=dict)
    read: dict[str, None] = field(default_factory=dict)
    positional: dict[str, None] = field(default_factory=dict)
    calls: dict[tuple[str, bool], None] = field(default_factory=dict)
    # In order: each call (its command word, whether with arguments), and, with None, the
    # word of each statement that is one simple command, up to the first `return`: if
    # that word is `exit` or a function that always exits, the body stops there.
    steps: list[tuple[str, bool | None]] = field(default_factory=list)
    returns: bool = False


@dataclass(slots=True)
class Names:
    """The names of a piece of shell: its top level and its functions, in order."""

    top: Body = field(default_factory=Body)
    functions: dict[str, Body] = field(default_factory=dict)

    def assigned(self) -> dict[str, None]:
        """Every name assigned, in the order first met (a summary must read the same in
        every process: the cache knows a check by its text)."""
        return dict.fromkeys(name for body in self.bodies() for name in body.assigned)

    def bodies(self) -> list[Body]:
        return [self.top, *self.functions.values()]


def names_of(text: str) -> Names:
    """Return the names `text` uses."""
    names = Names()
    _Parser(names).run(_Lexer(text).tokens())
    return names


def exiting(functions: dict[str, Body]) -> set[str]:
    """The functions that always exit: a statement of theirs before any `return` is `exit`,
    or a call of one that always exits."""
    found: set[str] = set()
    while True:
        more = {name for name, body in functions.items() if leaves(body, found)}
        if more == found:
            return found
        found = more


def leaves(body: Body, exits: set[str]) -> bool:
    """Whether `body` always exits, `exits` being the functions that do."""
    return any(arguments is None and (word == "exit" or word in exits)
               for word, arguments in body.steps)


@dataclass(slots=True)
class _Word:
    text: str
    read: list[str] = field(default_factory=list)
    positional: list[str] = field(default_factory=list)
    # The commands of its command substitutions, each a token list.
    commands: list[list[object]] = field(default_factory=list)


class _Expansions(_Word):
    """The expansions of a here-document that is not quoted: no word of a command."""


class _Lexer:
    """Splits shell text into words and operators; newlines are operators too."""

    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0
        self.heredocs: list[tuple[str, bool, bool]] = []

    def tokens(self, closing: str = "") -> list[object]:
        """The tokens up to the end, or up to an unmatched `closing` (`)` or a backquote)."""
        found: list[object] = []
        depth = 0
        text = self.text
        while self.at < len(text):
            char = text[self.at]
            if self._blank():
                pass
            elif char == "\n":
                self.at += 1
                found.append("\n")
                self._heredoc_bodies(found)
            elif char == closing and (closing == "`" or depth == 0):
                self.at += 1
                return found
            elif (operator := self._operator()) is not None:
                depth += {"(": 1, ")": -1}.get(operator, 0)
                found.append(operator)
                if operator in ("<<", "<<-"):
                    self._heredoc_start(operator, found)
            else:
                word = self._word()
                if not (word.text.isdigit() and text[self.at:self.at + 1] in ("<", ">")):
                    found.append(word)  # else the number of a redirection's descriptor
        return found

    def _blank(self) -> bool:
        """Skip a blank, an escaped newline or a comment, if one is next."""
        text = self.text
        if text[self.at] in " \t":
            self.at += 1
        elif text.startswith("\\\n", self.at):
            self.at += 2
        elif text[self.at] == "#":
            end = text.find("\n", self.at)
            self.at = len(text) if end < 0 else end
        else:
            return False
        return True

    def _operator(self) -> str | None:
        for operator in (*_REDIRECTIONS, *_OPERATORS):
            if self.text.startswith(operator, self.at):
                self.at += len(operator)
                return operator
        return None

    def _heredoc_start(self, operator: str, found: list[object]) -> None:
        while self.text[self.at:self.at + 1] in (" ", "\t"):
            self.at += 1
        word = self._word()
        found.append(word)
        quoted = any(c in word.text for c in "'\"\\")
        delimiter = re.sub(r"['\"\\]", "", word.text)
        self.heredocs.append((delimiter, quoted, operator == "<<-"))

    def _heredoc_bodies(self, found: list[object]) -> None:
        """Skip the bodies of the here-documents started on the line just ended; one that is
        not quoted expands like a double-quoted word."""
        for delimiter, quoted, tabs in self.heredocs:
            start = body_end = self.at
            while self.at < len(self.text):
                body_end = self.at
                end = self.text.find("\n", self.at)
                end = len(self.text) if end < 0 else end
                line = self.text[self.at:end]
                self.at = min(end + 1, len(self.text))
                if (line.lstrip("\t") if tabs else line) == delimiter:
                    break
            else:
                body_end = self.at
            if not quoted:
                found.append(_Lexer(self.text[start:body_end]).expansions())
        self.heredocs = []

    def expansions(self) -> _Word:
        """The expansions of the whole text, as a double-quoted word's."""
        word = _Expansions("")
        while self.at < len(self.text):
            if self.text[self.at] == "\\":
                self.at += 2
            elif self.text[self.at] in "$`":
                self._expansion(word)
            else:
                self.at += 1
        return word

    def _word(self) -> _Word:
        word = _Word("")
        start, text = self.at, self.text
        while self.at < len(text):
            char = text[self.at]
            if char in " \t\n;&|()<>":
                break
            if not self._quoted_or_expanded(word, char):
                self.at += 1
        word.text = text[start:self.at]
        return word

    def _quoted_or_expanded(self, word: _Word, char: str) -> bool:
        """Step over what starts at `char`, if it is an escape, a quoted string or an
        expansion (noting in `word` what it reads); whether it was."""
        if char == "\\":
            self.at += 2
        elif char == "'":
            end = self.text.find("'", self.at + 1)
            self.at = len(self.text) if end < 0 else end + 1
        elif char == '"':
            self._double_quoted(word)
        elif char in "$`":
            self._expansion(word)
        else:
            return False
        return True

    def _double_quoted(self, word: _Word) -> None:
        self.at += 1
        while self.at < len(self.text) and self.text[self.at] != '"':
            if self.text[self.at] == "\\":
                self.at += 2
            elif self.text[self.at] in "$`":
                self._expansion(word)
            else:
                self.at += 1
        self.at += 1

    def _expansion(self, word: _Word) -> None:
        text = self.text
        if text[self.at] == "`":
            self.at += 1
            word.commands.append(self.tokens(closing="`"))
        elif text.startswith("$((", self.at):
            self.at += 3
            self._arithmetic(word)
        elif text.startswith("$(", self.at):
            self.at += 2
            word.commands.append(self.tokens(closing=")"))
        elif text.startswith("${", self.at):
            self.at += 2
            self._parameter(word)
        elif self.at + 1 < len(text) and text[self.at + 1] in _POSITIONAL:
            word.positional.append(text[self.at + 1])
            self.at += 2
        elif self.at + 1 < len(text) and text[self.at + 1] in _SPECIAL:
            self.at += 2
        elif (name := _NAME.match(text, self.at + 1)) is not None:
            word.read.append(name.group())
            self.at = name.end()
        else:
            self.at += 1

    def _parameter(self, word: _Word) -> None:
        """`${...}`: its name (after a `#` of length), then the words of its operator."""
        self._parameter_name(word)
        text, depth = self.text, 1
        while self.at < len(text):
            char = text[self.at]
            if self._quoted_or_expanded(word, char):
                continue
            if char == "}":
                depth -= 1
                self.at += 1
                if depth == 0:
                    return
            else:
                depth += char == "{"
                self.at += 1

    def _parameter_name(self, word: _Word) -> None:
        text = self.text
        if text[self.at] == "#" and text[self.at + 1:self.at + 2] not in ("}", ""):
            self.at += 1  # ${#NAME}, its length
        if self.at < len(text) and text[self.at] in _POSITIONAL:
            word.positional.append(text[self.at])
            self.at += 1
        elif (name := _NAME.match(text, self.at)) is not None:
            word.read.append(name.group())
            self.at = name.end()

    def _arithmetic(self, word: _Word) -> None:
        """`$((...))`: a bare name in it is read, as `$NAME` is."""
        depth, text = 0, self.text
        while self.at < len(text):
            if text.startswith("))", self.at) and depth == 0:
                self.at += 2
                return
            char = text[self.at]
            if char in "$`":
                self._expansion(word)
            elif (name := _NAME.match(text, self.at)) is not None:
                word.read.append(name.group())
                self.at = name.end()
            else:
                depth += {"(": 1, ")": -1}.get(char, 0)
                self.at += 1


@dataclass(slots=True)
class _Statement:
    """Where a walk of the tokens is: in command position or not; the command word and its
    arguments so far; what the next word is: "" (a command's), "target" (a redirection's),
    "name" (for's), "subject" and "in" (case's), "pattern" (case's, up to `)`), "brace" (a
    function's body); whether the statement so far is one simple command, and whether it
    goes on past a newline (after `&&`, `||` or `|`)."""

    start: bool = True
    command: str | None = None
    arguments: int = 0
    expect: str = ""
    simple: bool = True
    joined: bool = False


class _Parser:
    """Walks the tokens: which word is a command, an assignment, a function's name; which
    statements of a body are one simple command each."""

    def __init__(self, names: Names) -> None:
        self.names = names
        # The functions being defined, innermost last, each with the number of compound
        # commands open around its body.
        self.defining: list[tuple[Body, int]] = []
        self.open: list[str] = []  # the closing words of the compound commands open
        self.candidate: str | None = None  # the command of a simple statement going on

    @property
    def body(self) -> Body:
        return self.defining[-1][0] if self.defining else self.names.top

    def run(self, tokens: list[object]) -> None:
        state = _Statement()
        self.candidate = None
        for n, token in enumerate(tokens):
            if isinstance(token, _Expansions):
                self._expansions(token)
            elif isinstance(token, _Word):
                self._expansions(token)
                state.joined = False
                self._word(state, token.text, tokens[n + 1:n + 3] == ["(", ")"])
            else:
                self._operator(state, str(token))
        self._end_command(state)
        self._commit()

    def _word(self, state: _Statement, text: str, defines: bool) -> None:
        if state.expect == "brace":
            state.expect = ""  # the body of a function being defined starts
        if state.expect:
            self._expected(state, text)
        elif not state.start:
            self._argument(state, text)
        elif text in _OPENERS:
            self.open.append(_OPENERS[text])
            state.expect = {"for": "name", "case": "subject"}.get(text, "")
        elif self.open and text == self.open[-1]:
            self._close()
        elif defines:
            self._define(text)
            state.expect = "brace"
        elif (assignment := _ASSIGNMENT.match(text)) is not None:
            self.body.assigned.setdefault(assignment.group(1))
        elif text not in _KEEP_POSITION:
            state.command, state.arguments, state.start = text, 0, False
            self.body.returns |= text == "return"
            if state.simple and self._at_body_level():
                self.candidate = text

    def _argument(self, state: _Statement, text: str) -> None:
        state.arguments += 1
        if state.command in _ASSIGNING and not text.startswith("-") and \
                state.arguments > _ASSIGNING[state.command]:
            match = _ASSIGNMENT.match(text + "=")
            if match is not None:
                self.body.assigned.setdefault(match.group(1))

    def _expected(self, state: _Statement, text: str) -> None:
        """A word that is a redirection's target, or part of a `for` or `case`."""
        if state.expect == "name":
            self.body.assigned.setdefault(text)
            state.start = False  # `in WORDS` are no command
        elif state.expect in ("subject", "in"):
            state.expect = {"subject": "in", "in": "pattern"}[state.expect]
            return
        elif state.expect == "pattern" and text != "esac":
            return
        elif state.expect == "pattern":
            self._close()
        state.expect = ""

    def _operator(self, state: _Statement, token: str) -> None:
        if state.expect == "brace":
            return  # the `()` of a definition
        if state.expect == "pattern":
            state.expect = "" if token == ")" else state.expect
        elif token in _REDIRECTIONS:
            state.expect = "target"
        elif token == "(" and state.start:
            self.open.append(")")
        elif token == ")" and self.open[-1:] == [")"]:
            self._close()
        elif not (token == "\n" and state.joined):  # after `&&`, `||`, `|`: goes on
            self._end_command(state)
            state.command, state.arguments, state.start = None, 0, True
            if token in ("&&", "||", "|", "&"):
                self.candidate = None  # not one simple command: may go on
            else:
                self._commit()
            state.simple = token not in ("&&", "||", "|")
            state.joined = not state.simple
            state.expect = "pattern" if token == ";;" else state.expect

    def _expansions(self, word: _Word) -> None:
        body = self.body
        for name in word.read:
            body.read.setdefault(name)
        for name in word.positional:
            body.positional.setdefault(name)
        for tokens in word.commands:
            # A command substitution: its commands are the body's, its compounds its own.
            # (its statements are no body's own: `exit` there leaves the subshell only).
            outer, candidate, self.open = self.open, self.candidate, ["$("]
            self.run(tokens)
            self.open, self.candidate = outer, candidate

    def _define(self, name: str) -> None:
        body = self.names.functions.setdefault(name, Body())
        self.defining.append((body, len(self.open)))

    def _close(self) -> None:
        self._commit()
        self.open.pop()
        if self.defining and len(self.open) == self.defining[-1][1]:
            self.defining.pop()  # the function's body

    def _at_body_level(self) -> bool:
        """Whether a statement here is one of the body's own, in no compound command."""
        return len(self.open) == (self.defining[-1][1] + 1 if self.defining else 0)

    def _commit(self) -> None:
        """The statement ended was one simple command: it may leave. At the top level, only
        by `exit` or a function defined before it (shellcheck takes a call of one defined
        later for a command's)."""
        body, word = self.body, self.candidate
        if word is not None and not body.returns and (
                self.defining or word == "exit" or word in self.names.functions):
            body.steps.append((word, None))
        self.candidate = None

    def _end_command(self, state: _Statement) -> None:
        if state.command is not None:
            call = (state.command, state.arguments > 0)
            self.body.calls.setdefault(call)
            self.body.steps.append(call)
