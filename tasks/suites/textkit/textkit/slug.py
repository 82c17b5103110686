def slugify(title):
    """Turn a title into a URL slug: lowercase words joined by hyphens.

    >>> slugify("Hello World")
    'hello-world'
    """
    return "-".join(title.split())
