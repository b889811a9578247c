"""Drawing the analysis: terminal tables, HTML with inline SVG, JSON, CSV and badges.
"""
