"""NeMo Curator's text constants (``nemo_curator/stages/text/utils/constants.py``), as facts.

The heuristic filters and the modifiers that mirror NeMo's read the same values: one definition here
keeps them in step.
"""

import string

#: A sentence (line) that ends with one of these, after stripping, has an end mark.
END_MARKS = (".", "?", "!", '"', "'")
#: Ellipsis marks: a word equal to one is a symbol word; a line ending with one ends in an ellipsis.
ELLIPSIS_MARKS = ("...", "[...]", "…", "(...)", "[…]", "-»", "read more..", "read more")
#: A paragraph containing one of these (lower-cased) is boilerplate.
POLICY_SUBSTRINGS = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "privacy overview",
    "use of cookies",
    "use cookies",
    "privacy & cookies policy",
    "privacy and cookies policy",
    "this website uses cookies to improve your experience while you navigate through the website. out of "
    "these cookies, the cookies that are categorized as necessary are stored on your browser as they are "
    "essential for the working of basic functionalities of the website. we also use third-party cookies "
    "that help us analyze and understand how you use this website. these cookies will be stored in your "
    "browser only with your consent. you also have the option to opt-out of these cookies. but opting out "
    "of some of these cookies may have an effect on your browsing experience.",
    "necessary cookies are absolutely essential for the website to function properly. this category only "
    "includes cookies that ensures basic functionalities and security features of the website. these "
    "cookies do not store any personal information.",
    "any cookies that may not be particularly necessary for the website to function and is used "
    "specifically to collect user personal data via analytics, ads, other embedded contents are termed as "
    "non-necessary cookies. it is mandatory to procure user consent prior to running these cookies on your "
    "website.",
    "this site uses cookies, including for analytics, personalization, and advertising purposes. for more "
    "information or to change your cookie settings, click here.",
    "if you continue to browse this site without changing your cookie settings, you agree to this use. acceptread more",
)
#: White space as NeMo's WhiteSpaceFilter counts it ("\b" is the backspace character).
WHITE_SPACE = ("\t", "\n", "\r", "\b", " ")
COMMON_ENGLISH_WORDS = frozenset({"the", "be", "to", "of", "and", "that", "have", "with"})
BULLETS = ("•", "‣", "⁃", "⁌", "⁍", "∙", "○", "●", "◘", "◦", "⦾", "⦿")  # noqa: RUF001
#: NeMo's alphanumeric characters (its NonAlphaNumericFilter counts newlines and ?!,. as such).
ALPHANUMERIC = string.ascii_letters + string.digits + "\n?!,."
PARENTHESES = "{}⟨⟩[]()"
#: NeMo's default URL pattern. It is valid RE2 with the same matches as Python's ``re``, so the column
#: path runs it as an Arrow kernel.
URL_PATTERN = r"https?://(?:[A-Za-z0-9$\-_@.&+/:=?#~]|[!*\(\),]|(?:%[0-9A-Fa-f]{2}))+"
