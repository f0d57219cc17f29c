"""adaptive_hmc"""
