"""The "mm2-failover reports" pages, one module per concern (issue 51 item 1): :mod:`mm2_failover.ui.app` the
FastAPI app and its routes (mounted by ``airflow_plugin.py``; which page is where: its docstring),
:mod:`mm2_failover.ui.pages` the HTML, :mod:`mm2_failover.ui.runs` finding the runs, reading their files and
scrubbing them, :mod:`mm2_failover.ui.access` who may read what. Nothing is re-exported here: import the module that
defines what you use.
"""
