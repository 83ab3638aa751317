"""Where to compress: a per-group sensitivity map with intervals, turned into a schedule.

``config`` (torch-free) says what is asked; ``groups`` finds the unit (a Torch-Pruning
dependency group, a layer's weight, a fused op's quantizers); ``subset`` draws the screening
examples; ``profile`` maps time and multiply-adds to modules; ``cells`` measures one group at
one level; ``mapper`` builds the map; ``schedule`` (torch-free) turns it into a per-group
schedule; ``diagnostics`` compares any variant's layers with the baseline's. Importing the
package loads nothing: its modules import torch where they need it.
"""
