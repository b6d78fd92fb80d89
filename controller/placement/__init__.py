"""Aggregation placement: which switches aggregate for each job (SOAR, min-congestion, baselines).

tree.py cuts a job's aggregation tree out of a topology; algorithms.py places aggregators on
one tree; jobs.py shares switch slot budgets among several jobs.
"""
from controller.placement.algorithms import ALGORITHMS, Placement, evaluate, link_name, min_congestion, place, soar
from controller.placement.jobs import Job, JobPlacement, place_jobs
from controller.placement.tree import WEIGHT_MODES, AggTree, PlacementError, job_tree

__all__ = ["ALGORITHMS", "WEIGHT_MODES", "AggTree", "Job", "JobPlacement", "Placement", "PlacementError",
           "evaluate", "job_tree", "link_name", "min_congestion", "place", "place_jobs", "soar"]
