"""{{ cookiecutter.project_name }}: {{ cookiecutter.description }}"""

# The template's version this project was rendered from (its newest release); `cruft update` moves it on.
__version__ = "{{ cookiecutter._template_version }}"
