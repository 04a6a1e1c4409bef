"""What did my class get wrong? The misconception report of a graded class (``mhalib report``).

Modules, one concept each: :mod:`~.reading` (results and gradebook, no re-grading),
:mod:`~.scores` (final scores from the gradebook), :mod:`~.outcomes` (one outcome per student
and exercise), :mod:`~.statistics` (facility and discrimination, formulas in its docstring),
:mod:`~.exercises` and :mod:`~.quick_checks` (per item), :mod:`~.examples` (anonymised code),
:mod:`~.sections` (links to the lesson), :mod:`~.reteach` (the summary at the top),
:mod:`~.grid` (student x exercise, pseudonyms), :mod:`~.build` (all of it), :mod:`~.charts`
(accessible SVG), :mod:`~.page` and :mod:`~.page_items` (the HTML file), :mod:`~.tables`
(CSV and JSON) and :mod:`~.output` (writing the files).
"""
