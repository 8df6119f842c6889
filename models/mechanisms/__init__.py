"""Mechanisms as plug-ins, one subpackage each, and the plug-in interface they share."""
