"""The testing kit: a local Gemini Live server (``emulator``), a scripted caller that drives the
package through it, and the pytest plugin with their fixtures.

It ships with the package but needs the ``testing`` extra (``pip install
'realtime-resumption[testing]'``) for what only tests use; production code never imports it.
"""
