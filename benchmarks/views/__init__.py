"""What people read: the views of the engine's typed records (a recommendation's certificate,
a sensitivity map, a data-parallel scaling table, a language model's run) and the HTML report
that holds every view. Above the engine's packages whose records they draw; below the CLI and
the dashboard, which print and draw them. Plotly and Jinja2 only: no torch, no Streamlit."""
