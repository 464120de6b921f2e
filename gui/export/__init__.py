"""Files written from what is on screen: the report (a PNG per plot, the composed sheet, the CSVs)
and its folder dialog."""
