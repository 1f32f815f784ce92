"""The documentation site's own code: the configuration reference generated from the settings models
(config_reference.py) and the MkDocs hook that makes the README the site's front page (mkdocs_hooks.py)."""
