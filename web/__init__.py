"""profboard web: Jinja2 templates and static ES modules for the dashboard."""
