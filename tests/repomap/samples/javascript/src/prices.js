export const TAX_RATE = 0.2;

export function priceWithTax(amount) {
  return amount * (1 + TAX_RATE);
}

export const formatPrice = (amount) => `$${amount.toFixed(2)}`;
