"""Reference curves of the theory, checked against simulation.

Pure numpy/scipy (torch only in the simulators); imports nothing else from geomlens.
"""
