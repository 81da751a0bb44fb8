"""The kit in more than one language (English is the source; ``zh`` is Simplified Chinese).

* :mod:`pagedlab.i18n.messages`: the learner's language, chosen once (``PAGEDLAB_LANG=zh`` or
  :func:`set_language`), and the message catalog (``zh.po`` beside it, gettext ``.po``, msgid = the
  English text, ``{name}`` for formatted values) that ``check()``'s report, the SVG pictures' text and
  the self-checks pass through at the one point where each renders.
* :mod:`pagedlab.i18n.figures`: matplotlib figures' texts through the same catalog as they are rendered.
* :mod:`pagedlab.i18n.notebooks`: the notebooks' catalogs (``solutions/<lang>/<notebook>.po``, one
  entry per markdown cell keyed by its nbformat cell id), their stale/missing check and the
  translated copy of a solution notebook that ``pagedlab labs build`` turns into ``labs/<lang>/``.
"""

from pagedlab.i18n.messages import LANGUAGES, I18nError, get_language, set_language, tr

__all__ = ["LANGUAGES", "I18nError", "get_language", "set_language", "tr"]
