"""The AggNet aggregation protocol: what switches, the controller and hosts agree on.

It sits below `hosts` and `controller` (both import it, it imports neither), so the packet
format has one definition: `protocol.wire`. `protocol.layer` is its scapy layer, and
`protocol.job` the job spec the controller hands every worker.
"""
