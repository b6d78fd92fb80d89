"""Configuration as data: frozen dataclasses read from YAML/JSON mappings and from command-line
options by one loader driven by their fields (config.fields). Packages define their own config
dataclasses (the testbed's run, the hosts' training, ...) and read them through it, so every file
and every option fails the same way: one line naming the file or option and the field.
"""
from .fields import ConfigError, FieldProblem, add_options, flat_dict, from_options, given_argv, load, option, to_dict

__all__ = ["ConfigError", "FieldProblem", "add_options", "flat_dict", "from_options", "given_argv", "load", "option",
           "to_dict"]
