"""BMv2's Thrift runtime API (what simple_switch_CLI and p4-utils speak) for the embedded switch."""
