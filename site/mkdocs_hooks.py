"""The site's mkdocs hooks (mkdocs.yml `hooks:`).

The blog plugin renders a post again for every view that lists it (the blog index, archive and
category pages), converting the post's whole Markdown only to keep what comes before the excerpt
separator. A Part of a node campaign is hundreds of kilobytes of tables and chart specs, so those
renders were most of the site's build. Here an excerpt is converted from the Markdown before the
separator alone; what follows it only tells the view that there is more to read (its "Continue
reading" link). The excerpt shown is the same.
"""
from __future__ import annotations

from material.plugins.blog.structure import Excerpt

_MORE = "\n\nThe rest of the post.\n"   # stands for the body after the separator; never shown


def _excerpt_only(render):
    def excerpt_render(self, page, separator):
        whole = self.post.markdown
        head, found, _ = whole.partition(separator)
        if not found:
            return render(self, page, separator)
        self.post.markdown = head + separator + _MORE
        try:
            return render(self, page, separator)
        finally:
            self.post.markdown = whole
    excerpt_render.excerpt_only = True
    return excerpt_render


def on_config(config):
    if not getattr(Excerpt.render, "excerpt_only", False):
        Excerpt.render = _excerpt_only(Excerpt.render)
    return config
