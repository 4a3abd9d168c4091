"""The real documentation sites' side: their renderers (GitLab's Hugo, Travis' Jekyll; GitHub's
is JavaScript, in tests/realdocs/github), the BeautifulSoup reference extraction, Chromium's own
tree, the page fuzzer and the Selenium crawl of the predecessor study. Site sources and fixtures
stay in tests/realdocs."""

from peers import ROOT

#: The site sources and fixtures the renderers read.
SOURCES = ROOT / "tests" / "realdocs"
