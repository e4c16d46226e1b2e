"""Tools for building cronwrap: never installed, never imported by the cronwrap package."""
